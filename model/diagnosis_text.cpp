#include "model/diagnosis_text.h"

#include "base/byte_size.h"

namespace oomguard {

std::string DiagnosisAmount(const Diagnosis& d) {
  const std::string bytes = FormatBytes(d.bytes);
  switch (d.per) {
    case DiagnosisPer::kPeak:
      return bytes + " at the peak";
    case DiagnosisPer::kIteration:
      return bytes + " per iteration";
    case DiagnosisPer::kStep:
      return bytes + " per step";
    case DiagnosisPer::kPhaseEnd:
      return bytes + (d.phase.empty() ? " when its phase ends" : " at the end of " + d.phase);
    case DiagnosisPer::kOnce:
      return d.bytes == 0 ? "no bytes" : bytes;
  }
  return bytes;
}

std::string DiagnosisLabel(const Diagnosis& d) {
  return std::string(IsAdvice(d.kind) ? "advice " : "diagnosis ") + std::string(Name(d.kind));
}

std::string MeasuredFixText(const MeasuredFix& fix, int64_t peak_bytes) {
  std::string text = fix.fix + ":";
  // A fix that failed with an error measured nothing: how far it got is not what it saves.
  if (fix.outcome.starts_with("error")) return text + " " + fix.outcome + (fix.error.empty() ? "" : ": " + fix.error);
  if (fix.outcome != "pass") text += " " + fix.outcome + ",";
  text += " peak " + FormatBytes(fix.peak_bytes) + " (" + FormatSignedBytes(fix.peak_bytes - peak_bytes) +
          "), live after " + FormatBytes(fix.live_after_bytes);
  if (fix.live_growth_per_iteration && *fix.live_growth_per_iteration != 0) {
    text += ", growth " + FormatSignedBytes(static_cast<int64_t>(*fix.live_growth_per_iteration)) + "/iteration";
  }
  return text;
}

}  // namespace oomguard
