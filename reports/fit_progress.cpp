#include "reports/fit_progress.h"

#include "base/byte_size.h"
#include "reports/report_format.h"

namespace oomguard {

std::string TargetLabel(const std::string& card, int64_t cap_bytes) {
  const std::string cap = "cap " + FormatBytes(cap_bytes);
  return card.empty() ? cap : card + " (" + cap + ")";
}

FitProgress::FitProgress(std::ostream& err, bool terminal, std::string knob_field, bool smallest)
    : err_(err), terminal_(terminal), knob_field_(std::move(knob_field)), smallest_(smallest) {}

void FitProgress::Draw(const std::string& line) {
  err_ << "\r\033[K" << line << std::flush;  // back to the line's start, and erase the old text
  drawn_ = true;
}

void FitProgress::TrialLine(const std::string& line, double ms) {
  if (terminal_) {
    Draw(line);
  } else if (ms - last_line_ms_ >= kQuietMs) {
    err_ << line << "; " << FormatSeconds(ms) << " so far\n" << std::flush;
    last_line_ms_ = ms;
  }
}

void FitProgress::DoneLine(const std::string& line) {
  if (terminal_) {
    Draw(line);
  } else {
    err_ << line << "\n" << std::flush;
  }
  last_line_ms_ = 0;  // the next clock starts again
}

void FitProgress::OnTrial(const std::string& variant, const std::string& target_label, int64_t n, int64_t value,
                          const std::string& outcome, double card_ms) {
  TrialLine("fit: " + variant + " on " + target_label + ": trial " + std::to_string(n) + ", " + knob_field_ + " " +
                std::to_string(value) + " " + outcome,
            card_ms);
}

void FitProgress::OnProbeTrial(const std::string& variant, const std::string& probe_label, int64_t n, int64_t of,
                               int64_t value, const std::string& outcome, double probe_ms) {
  TrialLine("fit: " + variant + ", probe (" + probe_label + "): trial " + std::to_string(n) + " of " +
                std::to_string(of) + ", " + knob_field_ + " " + std::to_string(value) + " " + outcome,
            probe_ms);
}

void FitProgress::OnProbeDone(const std::string& variant, const std::string& probe_label, int64_t trials,
                              bool does_not_fall, int64_t first, double duration_ms) {
  const std::string what = does_not_fall ? "memory does not fall with the world, only " + knob_field_ + " " +
                                               std::to_string(first) + " searched"
                                         : "searched as usual";
  DoneLine("fit: " + variant + ", probe (" + probe_label + "): " + what + "; " + std::to_string(trials) +
           (trials == 1 ? " trial, " : " trials, ") + FormatSeconds(duration_ms));
}

void FitProgress::OnCardDone(const std::string& variant, const CardFit& fit, double duration_ms) {
  std::string what;
  if (!fit.error.empty()) {
    what = fit.error;
  } else if (smallest_ && !fit.min_value) {
    what = "not even " + knob_field_ + " " + std::to_string(fit.last_oom_value.value_or(0)) + " fits";
  } else if (smallest_) {
    what = knob_field_ + " " + std::to_string(*fit.min_value) + " fits (peak " + FormatBytes(fit.peak_bytes_at_min) +
           ")" +
           (fit.last_oom_value ? ", " + std::to_string(*fit.last_oom_value) + " does not" : ", the smallest searched");
  } else if (!fit.max_value) {
    what = "not even " + knob_field_ + " " + std::to_string(fit.first_oom_value.value_or(0)) + " fits";
  } else {
    what = knob_field_ + " " + std::to_string(*fit.max_value) + " fits (peak " + FormatBytes(fit.peak_bytes_at_max) +
           ")" +
           (fit.first_oom_value ? ", " + std::to_string(*fit.first_oom_value) + " does not" : ", the largest searched");
  }
  DoneLine("fit: " + variant + " on " + TargetLabel(fit.card, fit.cap_bytes) + ": " + what + "; " +
           std::to_string(fit.trials) + (fit.trials == 1 ? " trial, " : " trials, ") + FormatSeconds(duration_ms));
}

void FitProgress::Finish() {
  if (drawn_) err_ << "\r\033[K" << std::flush;
  drawn_ = false;
}

}  // namespace oomguard
