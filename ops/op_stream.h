// The one RecordFunction callback through which a measured run watches its operators (Note [One op
// dispatch]). Observers subscribe to it instead of registering callbacks of their own.
//
//   class CopyCounter : public oomguard::OpObserver {
//     std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) override { ...; return nullptr; }
//   };
//   CopyCounter counter;
//   oomguard::OpSubscription watching(&counter, {.op_starts = true, .inputs = true});
//   ... operators run; counter.OnOpStart is called for each ...
//   watching.SetActive(false);  // not called, and its needs leave the callback, until SetActive(true)
//
// Note [One op dispatch]: a RecordFunction callback costs every operator, whatever it does. With any
// FUNCTION-scope callback registered the dispatcher leaves its fast path and builds a RecordFunction
// per operator; if any callback needs inputs it boxes every argument (a List for each size argument),
// if any needs outputs it captures every result; and the autograd engine rebuilds each thread's
// callback lists twice per backward node, at a cost that grows with the callbacks registered. So the
// run's observers (transfers, host scalars, the detectors, the layer trace, cuda copy timing) subscribe
// here, and one callback, whose scopes, inputs and outputs are the union of what the active
// subscriptions ask for, calls each of them in the order they subscribed. With no active subscription
// nothing is registered and operators run on the dispatcher's fast path. A subscription needed only at
// times (the transfer counter on cpu and meta, only while a host block is alive) is turned off in
// between, and the callback is registered again with the smaller union.
//
// Subscribe, unsubscribe and SetActive on any thread, though never inside an observer's callback;
// callbacks come from the threads that run operators (the autograd engine's too). OnOpEnd can come
// for an operator whose OnOpStart came before the subscription did (it was running then). An operator
// another thread starts while the callback is being registered again may go unseen: turn subscriptions
// on and off only where the run's operators are on one thread (cpu and meta).
#pragma once

#include <ATen/record_function.h>

#include <memory>

namespace oomguard {

// What an observer is called for, and what RecordFunction must give it.
struct OpInterests {
  bool op_starts = false;       // OnOpStart for each operator (RecordScope::FUNCTION)
  bool op_ends = false;         // OnOpEnd for each operator
  bool inputs = false;          // fn.inputs() in OnOpStart: every operator's arguments are boxed
  bool outputs = false;         // fn.outputs() in OnOpEnd: every operator's results are captured
  bool backward_nodes = false;  // OnBackwardNode as each autograd node starts (RecordScope::BACKWARD_FUNCTION)
  bool backward_node_ends = false;  // OnBackwardNodeEnd as each autograd node's function returns

  bool operator==(const OpInterests&) const = default;
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // A context returned here is handed to the same operator's OnOpEnd, then destroyed.
  virtual std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction&) { return nullptr; }
  virtual void OnOpEnd(const at::RecordFunction&, at::ObserverContext*) {}
  virtual void OnBackwardNode(const at::RecordFunction&) {}
  virtual void OnBackwardNodeEnd(const at::RecordFunction&) {}
};

// Subscribes `observer` (which must outlive it) with `interests`, active or not. At most
// kMaxOpSubscriptions at a time (a programmer's bug past that: it aborts).
class OpSubscription {
 public:
  static constexpr int kMaxOpSubscriptions = 8;

  OpSubscription(OpObserver* observer, OpInterests interests, bool active = true);
  ~OpSubscription();
  OpSubscription(const OpSubscription&) = delete;
  OpSubscription& operator=(const OpSubscription&) = delete;

  void SetActive(bool active);

 private:
  int slot_;
};

// What is registered now: for tests, and for what the run says it watched.
struct OpStreamState {
  bool registered = false;  // a RecordFunction callback is installed
  OpInterests needs;        // its union (op_starts and op_ends stand for the FUNCTION scope)
  int subscriptions = 0;    // active or not
  int active = 0;
};
OpStreamState CurrentOpStream();

}  // namespace oomguard
