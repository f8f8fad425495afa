// Progress of `oomguard fit` on stderr while it searches. On a terminal (ConsoleStyle::terminal), one
// line redrawn in place (`\r`) after every trial; elsewhere (CI logs, pipes), one line per finished
// variant and card, and a line for a trial that ends 10 s or more after the last line, so that a long
// search is never silent:
//
//   fit: pitfall on t4 (cap 14.33 GiB): data.batch 23157 fits (peak 14.33 GiB), 23158 does not; 14 trials, 0.3 s
//   fit: zero2 on h200 (cap 139.38 GiB): parallel.world 16 fits (peak 131.20 GiB), 8 does not; 6 trials, 4.1 s
//
// A workload's world fit first probes whether its memory falls with the world (Note [A workload whose
// memory does not fall], fit/fit_world.h): those trials are drawn and quiet-timed as the search's, and
// a line ends the probe, so that a card's line counts and times its own search alone:
//
//   fit: replicated, probe (no cap): trial 2 of 3, parallel.world 2 fits
//   fit: replicated, probe (no cap): memory does not fall with the world, only parallel.world 1 searched; 3 ...
//
// A streaming writer: events in firing order, each rendered as it arrives. Nothing here can fail.
#pragma once

#include <ostream>
#include <string>

#include "model/fit_results.h"

namespace oomguard {

class FitProgress {
 public:
  // smallest: the search is for the smallest fitting value (--knob world; CardFit::min_value).
  FitProgress(std::ostream& err, bool terminal, std::string knob_field, bool smallest = false);

  // After each trial: the n-th for this card, `outcome` "fits", "does not fit" or "error", `card_ms`
  // after the card's search began. Drawn on a terminal; elsewhere written when kQuietMs passed since the
  // last line.
  void OnTrial(const std::string& variant, const std::string& target_label, int64_t n, int64_t value,
               const std::string& outcome, double card_ms);
  static constexpr double kQuietMs = 10000;
  // After each trial of a workload's probe: the n-th of `of`, at `value`, under `probe_label` ("no
  // cap", "cap 80.00 GiB"), `probe_ms` after the probe began.
  void OnProbeTrial(const std::string& variant, const std::string& probe_label, int64_t n, int64_t of, int64_t value,
                    const std::string& outcome, double probe_ms);
  // After the probe: its `trials`, and whether it found the memory does not fall (then only `first`,
  // the first value, is searched).
  void OnProbeDone(const std::string& variant, const std::string& probe_label, int64_t trials, bool does_not_fall,
                   int64_t first, double duration_ms);
  // After each (variant, card) search.
  void OnCardDone(const std::string& variant, const CardFit& fit, double duration_ms);
  // Clears the redrawn line, so that what follows starts on a clean one.
  void Finish();

 private:
  void Draw(const std::string& line);
  // A trial's line: drawn on a terminal, else written when kQuietMs passed since the last line.
  void TrialLine(const std::string& line, double ms);
  // A finished search's or probe's line: drawn on a terminal, else written.
  void DoneLine(const std::string& line);

  std::ostream& err_;
  const bool terminal_;
  const std::string knob_field_;
  const bool smallest_;
  bool drawn_ = false;
  double last_line_ms_ = 0;  // card_ms of the last line written off a terminal
};

// "t4 (cap 14.33 GiB)", or "cap 12.00 GiB" for a plain cap (card empty).
std::string TargetLabel(const std::string& card, int64_t cap_bytes);

}  // namespace oomguard
