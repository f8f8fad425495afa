"""The plain test scripts' checks (test_measure.py, test_loop.py): each prints what it got and what
it wants, and the script fails at the end when any differed. And the training step several tests
measure."""


def train_sum(m, model, optimizer, x, iterations=2, set_to_none=True):
    """m.track(model, optimizer), then `iterations` steps of model(x).sum(), each phase marked."""
    m.track(model, optimizer)
    for _ in m.iterations(iterations):
        with m.phase("forward"):
            loss = model(x).sum()
        with m.phase("backward"):
            loss.backward()
        with m.phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=set_to_none)


class Checks:
    def __init__(self):
        self.failures = []

    def __call__(self, what, got, want):
        print(f"{what}: {got} (want {want})")
        if got != want:
            self.failures.append(what)

    def raises(self, what, call, kind, text):
        """call() raises `kind` with exactly `text`."""
        try:
            call()
        except kind as e:
            self(what, str(e), text)
        else:
            self(what, "no exception", f"{kind.__name__}: {text}")

    def exit_code(self):
        if self.failures:
            print("FAILED:", ", ".join(self.failures))
            return 1
        print("all equal")
        return 0
