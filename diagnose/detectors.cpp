#include "diagnose/detectors.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <string>

#include "base/byte_size.h"
#include "model/outcome.h"

namespace oomguard {
namespace {

std::string Plural(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return "0%";
  return std::to_string(static_cast<int>(std::lround(100.0 * static_cast<double>(part) / static_cast<double>(whole)))) +
         "%";
}

// "NllLossBackward0, made in the loss", "AddmmBackward0", "the loss".
std::string NodeAt(const std::string& node, const std::string& where) {
  if (node.empty()) return where;
  return where.empty() ? node : node + ", made in " + where;
}

// The largest three places of what survived, "128.00 KiB from its eval, 64.00 KiB from its forward (the loss)".
std::string Places(const std::vector<AliveGroup>& groups) {
  std::string places;
  for (size_t i = 0; i < groups.size() && i < 3; ++i) {
    const AliveGroup& g = groups[i];
    places += (i ? ", " : "") + FormatBytes(g.bytes) + " from its " + g.phase +
              (g.location.empty() ? "" : " (" + g.location + ")");
  }
  return places;
}

void EvalKeepsGraph(const RunObservations& seen, std::vector<Diagnosis>* out) {
  if (seen.evals.empty()) return;
  const EvalFinding& f =
      *std::max_element(seen.evals.begin(), seen.evals.end(),
                        [](const EvalFinding& a, const EvalFinding& b) { return a.bytes < b.bytes; });
  Diagnosis d;
  d.kind = DiagnosisKind::kEvalKeepsGraph;
  d.bytes = f.bytes;
  d.per = DiagnosisPer::kPhaseEnd;
  d.count = f.nodes;
  d.phase = "eval";
  d.where = NodeAt(f.root, f.where);
  d.event_index = f.event_index;
  d.message = "the evaluation of iteration " + std::to_string(f.iteration) + " keeps " +
              Plural(f.nodes, "autograd node", "autograd nodes") + " it made alive (newest " + d.where + "), holding " +
              FormatBytes(f.bytes) + " it allocated: it ran with autograd on and kept what it computed";
  d.fix =
      "run evaluation under no_grad (torch::NoGradGuard; Python: with torch.no_grad()), or keep "
      "what it computes as numbers (.item()) or detached tensors (.detach())";
  out->push_back(std::move(d));
}

const KeptFinding* LastKeptGraph(const RunObservations& seen) {
  for (auto it = seen.kept.rbegin(); it != seen.kept.rend(); ++it) {
    if (it->nodes > 0 && it->bytes > 0) return &*it;  // nodes holding nothing of N's cost no memory
  }
  return nullptr;
}

void GraphKeptAcrossIterations(const RunObservations& seen, std::vector<Diagnosis>* out) {
  const KeptFinding* f = LastKeptGraph(seen);
  if (f == nullptr) return;
  Diagnosis d;
  d.kind = DiagnosisKind::kGraphKeptAcrossIterations;
  d.bytes = f->bytes;
  d.per = DiagnosisPer::kIteration;
  d.count = f->nodes;
  d.phase = f->groups.empty() ? "" : f->groups.front().phase;
  d.where = NodeAt(f->root, f->root_where);
  d.event_index = f->event_index;
  d.message = Plural(f->nodes, "autograd node", "autograd nodes") + " of iteration " + std::to_string(f->iteration) +
              " (newest " + d.where + ") are still alive at the end of iteration " + std::to_string(f->iteration + 1) +
              ", with " + FormatBytes(f->bytes) + " that iteration allocated outside backward and the optimizer (" +
              Places(f->groups) + ")";
  d.fix =
      "keep numbers (loss.item()) or detached tensors (loss.detach()) from one iteration to the next, and "
      "backward with retain_graph only when a second backward needs the graph";
  out->push_back(std::move(d));
}

void RetainedGrad(const RunObservations& seen, std::vector<Diagnosis>* out) {
  if (seen.retained.empty()) return;
  const RetainedGradFinding& f = seen.retained.front();
  Diagnosis d;
  d.kind = DiagnosisKind::kRetainedGrad;
  d.bytes = f.bytes;
  d.per = DiagnosisPer::kPhaseEnd;
  d.count = f.tensors;
  d.phase = "backward";
  d.where = f.where;
  d.message = Plural(f.tensors, "non-leaf tensor holds", "non-leaf tensors hold") +
              " a .grad after the backward of iteration " + std::to_string(f.iteration) + ": " + FormatBytes(f.bytes) +
              " of gradients nothing but retain_grad() keeps" +
              (f.where.empty() ? "" : " (the largest from " + f.where + ")");
  d.fix =
      "call retain_grad() only on the tensors you inspect, or read their gradients in a hook (register_hook) "
      "without keeping them";
  out->push_back(std::move(d));
}

void Leak(const VariantMeasurement& m, const RunObservations& seen, std::vector<Diagnosis>* out) {
  const std::optional<double> growth = LiveGrowthPerIteration(m);
  if (!growth || *growth <= 0) return;
  const KeptFinding* graph = LastKeptGraph(seen);
  const auto grown = static_cast<int64_t>(std::llround(*growth));
  const int64_t unexplained = grown - (graph ? graph->bytes : 0);
  if (unexplained <= 0) return;
  Diagnosis d;
  d.kind = DiagnosisKind::kLeak;
  d.bytes = unexplained;
  d.per = DiagnosisPer::kIteration;
  std::string from;
  if (!seen.kept.empty() && !seen.kept.back().groups.empty()) {
    const KeptFinding& last = seen.kept.back();
    const AliveGroup& most = last.groups.front();
    d.phase = most.phase;
    d.where = most.location;
    d.event_index = last.event_index;
    const std::string places = Places(last.groups);
    from = "; of what iteration " + std::to_string(last.iteration) + " allocated, " + places +
           (last.groups.size() == 1 && last.groups[0].bytes == most.bytes ? " is" : " are") +
           " still alive at the end of iteration " + std::to_string(last.iteration + 1);
  }
  d.message = "live bytes grow by " + FormatBytes(unexplained) + " per iteration" +
              (graph ? " beyond the kept graphs" : "") + from;
  d.fix =
      "find what keeps tensors from one iteration to the next (a list, a cache, a member or module attribute) "
      "and keep numbers (.item()) or nothing instead";
  out->push_back(std::move(d));
}

// A diagnosis of what backward does each step: `count` and `bytes` over the run, per step.
Diagnosis PerStepInBackward(DiagnosisKind kind, int64_t count, int64_t bytes, const VariantMeasurement& m,
                            const RunObservations& seen) {
  const int64_t steps =
      std::max<int64_t>(1, std::max<int64_t>(seen.iterations, CompletedIterations(m)));
  Diagnosis d;
  d.kind = kind;
  d.count = count / steps;
  d.bytes = bytes / steps;
  d.per = DiagnosisPer::kStep;
  d.phase = "backward";
  return d;
}

void TransferInRecompute(const VariantMeasurement& m, const RunObservations& seen, const BackwardTransfers& copies,
                         std::vector<Diagnosis>* out) {
  if (copies.count == 0) return;
  Diagnosis d = PerStepInBackward(DiagnosisKind::kTransferInRecompute, copies.count, copies.bytes, m, seen);
  d.message = Plural(d.count, "host-to-device copy", "host-to-device copies") + " (" + FormatBytes(d.bytes) +
              ") per step ran during backward: a copy inside a checkpointed region is made again when the region "
              "is recomputed";
  d.fix =
      "copy the batch to the device before the checkpointed region (outside the checkpointed function), so the "
      "recomputation starts from the device tensor";
  out->push_back(std::move(d));
}

void Inplace(const VariantMeasurement& m, const RunObservations& seen, std::vector<Diagnosis>* out) {
  if (m.outcome.kind != Outcome::kError) return;
  if (m.outcome.category == ErrorCategory::kInplaceSavedTensor) {
    // autograd: "... modified by an inplace operation: [CPUFloatType [32, 64]], which is output 0 of
    // SigmoidBackward0, is at version 1; expected version 0 instead."
    static const std::regex kVersion(R"(inplace operation: \[(\w+) \[([0-9, ]*)\]\], which is output (\d+) of (\w+))");
    std::smatch match;
    std::string type, sizes, node;
    if (std::regex_search(m.error, match, kVersion)) {
      type = match[1];
      sizes = "[" + std::string(match[2]) + "]";
      node = match[4];
    }
    const InplaceOp* op = nullptr;
    for (auto it = seen.inplace.rbegin(); it != seen.inplace.rend() && op == nullptr; ++it) {
      std::string shape = "[";
      for (size_t i = 0; i < it->sizes.size(); ++i) shape += (i ? ", " : "") + std::to_string(it->sizes[i]);
      if (sizes.empty() || shape + "]" == sizes) op = &*it;
    }
    Diagnosis d;
    d.kind = DiagnosisKind::kInplaceOnSaved;
    d.per = DiagnosisPer::kOnce;
    d.count = 1;
    d.bytes = op ? op->bytes : 0;
    d.phase = op ? op->phase : "backward";
    d.where = (op && !op->location.empty() ? op->location + ", " : "") + (node.empty() ? "" : "saved by " + node);
    d.message = (op ? op->op : std::string("an in-place op")) +
                (op && !op->location.empty() ? " in " + op->location : "") + " edited a tensor" +
                (sizes.empty() ? "" : " " + sizes + " " + type) +
                (node.empty() ? "" : " that " + node + " saved for backward") +
                ", so backward refused it (autograd's version counter)";
    d.fix = "use the out-of-place op" +
            (op ? " (" + op->op.substr(0, op->op.size() - 1) + " for " + op->op + ")" : std::string()) +
            ", or edit a clone(); it costs " + (op ? FormatBytes(op->bytes) : std::string("one tensor")) + " more";
    out->push_back(std::move(d));
  } else if (m.outcome.category == ErrorCategory::kInplaceLeaf) {
    Diagnosis d;
    d.kind = DiagnosisKind::kInplaceOnLeaf;
    d.per = DiagnosisPer::kOnce;
    d.count = 1;
    d.where = seen.last_inplace_started_location;
    d.phase = "forward";
    const std::string op = seen.last_inplace_started.empty() ? "an in-place op" : seen.last_inplace_started;
    d.message = op + (d.where.empty() ? "" : " in " + d.where) +
                " edited a leaf tensor that requires grad (a parameter) with autograd on, which autograd refuses";
    d.fix =
        "edit parameters under no_grad (torch::NoGradGuard; Python: with torch.no_grad()), as optimizers do, or "
        "use the out-of-place op on a copy";
    out->push_back(std::move(d));
  }
}

void CheckpointRng(const VariantMeasurement& m, const RunObservations& seen, std::vector<Diagnosis>* out) {
  if (seen.unseeded_recompute_draws == 0) return;
  Diagnosis d = PerStepInBackward(DiagnosisKind::kCheckpointRng, seen.unseeded_recompute_draws,
                                  seen.unseeded_recompute_bytes, m, seen);
  d.where = seen.unseeded_recompute_where;
  d.message = "a checkpointed region draws random numbers (" + Plural(d.count, "draw", "draws") + ", " +
              FormatBytes(d.bytes) + " per step" + (d.where.empty() ? "" : ", in " + d.where) +
              ") and its recomputation draws new ones, without the forward's RNG state: dropout masks differ "
              "between forward and backward, so the gradients are wrong";
  d.fix = "checkpoint with preserve_rng_state=true (PyTorch's default): the forward's RNG state is saved and replayed";
  out->push_back(std::move(d));
}

int64_t EventAtPeak(const LedgerStats& ledger) {
  int64_t event = -1, live = -1;
  for (const TimelinePoint& p : ledger.timeline) {
    if (p.live_bytes > live) {
      live = p.live_bytes;
      event = p.event_index;
    }
  }
  return event;
}

void ActivationsDominate(const VariantMeasurement& m, std::vector<Diagnosis>* out) {
  int64_t forward = 0;
  for (const PhasePeak& p : m.ledger.peak_by_origin) {
    if (p.phase == "forward") forward = p.peak_bytes;
  }
  const int64_t peak = m.ledger.peak_bytes;
  if (peak <= 0 || 2 * forward <= peak) return;
  Diagnosis d;
  d.kind = DiagnosisKind::kActivationsDominate;
  d.bytes = forward;
  d.per = DiagnosisPer::kPeak;
  d.phase = m.ledger.peak_phase;
  d.event_index = EventAtPeak(m.ledger);
  d.message = "activations the forward allocated are " + FormatBytes(forward) + " of the " + FormatBytes(peak) +
              " peak (" + Percent(forward, peak) + ", in " + m.ledger.peak_phase +
              "): the batch, not the model, sets the peak";
  d.fix =
      "cut activations: a smaller micro-batch with gradient accumulation (same effective batch), activation "
      "checkpointing, or bf16 autocast";
  out->push_back(std::move(d));
}

}  // namespace

std::vector<Diagnosis> Diagnose(const VariantMeasurement& m, const RunObservations& seen,
                                const BackwardTransfers& transfers) {
  std::vector<Diagnosis> found;
  EvalKeepsGraph(seen, &found);
  GraphKeptAcrossIterations(seen, &found);
  RetainedGrad(seen, &found);
  Leak(m, seen, &found);
  TransferInRecompute(m, seen, transfers, &found);
  Inplace(m, seen, &found);
  CheckpointRng(m, seen, &found);
  ActivationsDominate(m, &found);
  return found;
}

}  // namespace oomguard
