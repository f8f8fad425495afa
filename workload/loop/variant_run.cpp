#include "workload/loop/variant_run.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include "allocators/meta_tracking_allocator.h"
#include "backends/meta/kernel_target.h"
#include "backends/meta/meta_item.h"
#include "model/dtype.h"
#include "model/phase.h"
#include "nn/autocast/autocast.h"
#include "nn/net_sources.h"
#include "nn/scalar_type.h"
#include "nn/torchscript/torchscript_net.h"
#include "workload/loop/batch_maker.h"
#include "workload/loop/cross_entropy.h"
#include "workload/error_category.h"
#include "workload/grad_digest.h"
#include "workload/loop/grad_scaler.h"
#include "workload/loop/master_weights.h"
#include "workload/loop/optimizer.h"
#include "workload/parallel/rank_group.h"
#include "workload/parallel/rank_strategy.h"
#include "workload/loop/pitfall_forward.h"
#include "workload/loop/segment_knobs.h"
#include "workload/loop/steady_state.h"

namespace oomguard {
namespace {

// The ledger books phases by name (Note [Phases as names in the ledger], model/phase.h).
void SetPhase(Ledger& ledger, Phase phase) { ledger.SetPhase(Name(phase)); }

int64_t Bytes(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

// Note [A value LibTorch refuses]: a std::runtime_error (not a c10::Error, not the TorchScript
// interpreter's) out of the catalog's loop is LibTorch refusing a number the loader let through
// (c10::checked_convert's "value cannot be converted to type float without overflow"). The loader
// bounds what it accepts (Note [Numbers LibTorch computes with in float], scenario/variant_json.h);
// should a value slip through, it is the scenario's input error, UNRESOLVED (exit 2) with LibTorch's
// message, never an abort (fit measures in its own process). A registered workload's own exceptions
// are not this loop's: they still end its child (Note [What a variant catches], workload.cpp).
std::string RefusedValueMessage(const std::runtime_error& e) {
  return std::string("LibTorch refused a value of the scenario: ") + e.what() +
         " (oomguard's loader accepted it and should not have: please report it)";
}

// One variant's run: the loop of scenario.h's LoopSpec with the knobs of PitfallSpec.
class VariantRun final : public MeasuredRun {
 public:
  VariantRun(const VariantSpec& spec, const VariantMeasureOptions& options, const BackendSession& backend,
             LayerTrace* trace, RunObserver* observer, VariantMeasurement* m)
      : spec_(spec),
        options_(options),
        ledger_(backend.account().ledger()),
        trace_(trace),
        observer_(observer),
        m_(*m),
        device_options_(at::TensorOptions().device(backend.device())),
        has_data_(backend.traits().has_data),
        batches_(spec, device_options_, has_data_) {
    if (spec.loop.autocast != "none") {
      autocast_ = AutocastSetting{backend.device().type(), spec.loop.autocast == "float16" ? at::kHalf : at::kBFloat16,
                                  CurrentKernelTarget().cuda() ? c10::kCUDA : c10::kCPU};
      if (spec.loop.autocast == "float16" && spec.loop.backward) scaler_.emplace();
    }
  }

  void Run() override {
    at::manual_seed(spec_.seed);
    try {
      std::optional<UncountedMetaScope> on_meta;  // Note [Meta-device init], workload/parallel/fully_sharded.h
      if (spec_.parallel.active() && spec_.parallel.init == "meta") on_meta.emplace();
      net_ = MakeNet(spec_.model,
                     (on_meta ? at::TensorOptions(at::kMeta) : device_options_).dtype(ScalarTypeOf(spec_.model.dtype)));
      m_.module = net_->module_facts();
      m_.warnings = net_->warnings();
      m_.error = SegmentKnobError(spec_.model, spec_.pitfalls, *net_);
    } catch (const ModelFileError& e) {
      m_.error = e.what();
    }
    if (net_) {
      params_ = net_->parameters();
      for (const at::Tensor& p : params_) m_.param_bytes += Bytes(p);
    }
    if (!m_.error.empty()) return InputError(m_.error);
    net_->set_trace(trace_);
    if (spec_.parallel.active()) {  // Note [One simulated rank], workload/parallel/data_parallel.h
      parallel_ = MakeRankStrategy(spec_.parallel, params_, *net_, device_options_);
      m_.param_bytes = parallel_->ParameterBytes();
    }
    forward_.emplace(spec_, ledger_, *net_, parallel_.get(), batches_);
    optimizer_ = MakeOptimizer(spec_.loop.optimizer, parallel_ ? parallel_->OptimizerParameters() : params_,
                               MasterGroupElements(spec_.parallel));
    // Master copies are optimizer state from setup on (Note [Master weights], workload/loop/master_weights.h).
    if (const int64_t held = optimizer_ ? StateBytesBeforeTheFirstStep(*optimizer_) : 0; held > 0) {
      m_.optimizer_state_bytes = held;
    }
    // Note [The step that repeats]: one iteration with a stateful optimizer is raised to two.
    const StepThatRepeats steady =
        StepThatRepeatsForLoop(spec_.loop, options_.iterations > 0 ? options_.iterations : spec_.loop.iterations);
    m_.steady_state = steady.note;
    m_.iterations_raised = steady.raised();
    for (int64_t i = 1; i <= steady.iterations; ++i) {
      ledger_.TakeWindowPeak();
      IterationMeasurement iteration;
      if (observer_) observer_->BeginIteration(i);
      try {
        TrainIteration(i == 1, &iteration);
      } catch (const ModelFileError& e) {  // a forward whose result holds no tensor
        return InputError(e.what());
      } catch (const LossInputError& e) {  // an output the loss cannot read (data.classes, its shape)
        return InputError(e.what());
      } catch (const std::runtime_error& e) {
        if (IsScriptInterpreterError(e)) throw;  // the module's own failure: the outcome
        if (JoinedRealRanks() != nullptr) return CollectiveFailed(e);
        return InputError(RefusedValueMessage(e));
      }
      iteration.live_after_bytes = ledger_.live_bytes();
      iteration.peak_bytes = std::max(window_peak_before_clip_, ledger_.TakeWindowPeak());
      window_peak_before_clip_ = 0;
      m_.iterations.push_back(iteration);  // only completed iterations count
      if (observer_) observer_->EndIteration();
    }
  }

  // What was live when the refused allocation was asked for, by category (called after a failure).
  LiveBreakdown Breakdown(int64_t live_at_refusal) const override {
    LiveBreakdown b = BreakdownByCategory(live_at_refusal, m_, params_, batch_bytes_);
    if (!net_) {  // refused while the model was being built: what is live is its parameters so far
      b.parameters_bytes += std::exchange(b.activations_and_transient_bytes, 0);
    }
    if (parallel_) parallel_->Attribute(&b);
    if (forward_) b.layers = forward_->layer_bytes();
    return b;
  }

 private:
  // Note [A collective that fails on a real rank]: gloo throws its own std::runtime_error (gloo::IoException,
  // "Connection closed by peer", a timeout) when a sibling rank is gone. That is this rank's error
  // outcome, the consequence of a sibling's failure (run/rank_children.cpp names the sibling), not a
  // value of the scenario that LibTorch refused.
  void CollectiveFailed(const std::runtime_error& e) {
    m_.outcome = VariantOutcome::Error(ErrorCategory::kError);
    m_.error = std::string("a collective failed, a sibling rank gone: ") + e.what();
  }

  // The scenario and its model disagree: bad input, not a measurement (the variant is UNRESOLVED).
  void InputError(const std::string& error) {
    m_.outcome = VariantOutcome::Error(ErrorCategory::kError);
    m_.error = m_.input_error = error;
  }

  void TrainIteration(bool first, IterationMeasurement* iteration) {
    SetPhase(ledger_, Phase::kZeroGrad);
    ZeroGrad();
    for (int64_t micro = 0; micro < spec_.loop.accumulate; ++micro) {
      const bool first_step = first && micro == 0;
      std::vector<at::Tensor> intermediates;
      Batch batch = NextBatch(spec_.pitfalls.transfer == "inside" ? std::nullopt : std::optional(Phase::kTransfer));
      SetPhase(ledger_, Phase::kForward);
      const int64_t before_forward = ledger_.live_bytes();
      at::Tensor output, loss;
      {
        std::optional<AutocastScope> autocast;  // the forward and the loss, as torch.autocast wraps them
        if (autocast_) autocast.emplace(*autocast_);
        output = forward_->Forward(batch, /*training=*/true, &intermediates);
        if (first_step && m_.module) m_.module->output = net_->module_facts()->output;
        if (trace_) trace_->EnterStage("the loss");
        loss = Loss(output, batch.target);
        if (trace_) trace_->Exit();
      }
      if (first_step) m_.forward_saved_bytes = ledger_.live_bytes() - before_forward;
      KeepLoss(loss, "train");
      if (spec_.loop.backward) {
        SetPhase(ledger_, Phase::kBackward);
        at::Tensor to_differentiate = spec_.loop.accumulate > 1 ? loss / spec_.loop.accumulate : loss;
        if (scaler_) to_differentiate = scaler_->Scale(to_differentiate);
        if (parallel_) parallel_->BeforeBackward();
        to_differentiate.backward({}, spec_.loop.retain_graph);
        if (parallel_) parallel_->AfterBackward();
        // What each layer's forward left live is freed now (or kept by a graph, which the activations
        // category still counts): an OOM report after this point must not list it per layer.
        forward_->ClearLayerBytes();
      }
      iteration->live_after_backward_bytes = ledger_.live_bytes();
      if (observer_ && spec_.loop.backward) observer_->BackwardDone();  // the micro-batch's locals still alive
      if (first_step) {
        int64_t retained = 0;
        for (const at::Tensor& t : intermediates) retained += Bytes(t.grad());
        m_.retained_grad_bytes = retained;
      }
    }
    batch_bytes_ = 0;
    if (first) {
      std::vector<at::Tensor> grads;
      int64_t grad_bytes = 0;
      for (const at::Tensor& p : params_) {
        grads.push_back(p.grad());
        grad_bytes += Bytes(p.grad());
      }
      m_.grad_bytes = parallel_ ? parallel_->GradientBytes() : grad_bytes;
      m_.grad_digest = GradDigest(grads, has_data_);
    }
    // No optimizer, no scaler and no clipping: no optimizer phase, as before these knobs existed.
    if (spec_.loop.backward && (optimizer_ || scaler_ || spec_.loop.clip_grad_norm > 0)) Step(first);
    if (first && !m_.optimizer_state_bytes) m_.optimizer_state_bytes = 0;  // no step, no state
    if (first && parallel_) {
      m_.parallel = parallel_->Facts();
      m_.parallel->master_weights = spec_.loop.optimizer.master_weights;
    }
    if (spec_.loop.eval.batches > 0) Evaluate();
  }

  // The optimizer phase: unscale (float16), clip, step, update the scale, in the order PyTorch's AMP
  // recipe gives them.
  void Step(bool first) {
    SetPhase(ledger_, Phase::kOptimizer);
    if (scaler_) scaler_->Unscale(params_);
    if (spec_.loop.clip_grad_norm > 0) ClipGradients(first);
    if (optimizer_ && (!scaler_ || scaler_->FoundNoInf(has_data_))) {
      const int64_t before = ledger_.live_bytes();
      if (trace_) trace_->EnterStage("the optimizer step");
      optimizer_->step();
      if (parallel_) parallel_->AfterStep();
      if (trace_) trace_->Exit();
      if (first) m_.optimizer_state_bytes = m_.optimizer_state_bytes.value_or(0) + ledger_.live_bytes() - before;
    } else if (optimizer_ && !warned_of_a_skipped_step_) {
      warned_of_a_skipped_step_ = true;
      m_.warnings.push_back(
          "the GradScaler skipped an optimizer step: float16 gradients overflowed at the loss scale (a meta run "
          "cannot see values and never skips, so cpu and meta differ from that step on)");
    }
    if (scaler_) scaler_->Update();
  }

  // torch::nn::utils::clip_grad_norm_ itself; on meta its item() (the norm it returns) reads 0.
  void ClipGradients(bool first) {
    const int64_t before = ledger_.live_bytes();
    const int64_t window_so_far = ledger_.TakeWindowPeak();
    {
      if (trace_) trace_->EnterStage("clip_grad_norm_");
      MetaItemScope unknown_norm;
      torch::nn::utils::clip_grad_norm_(params_, spec_.loop.clip_grad_norm);
      if (trace_) trace_->Exit();
    }
    const int64_t clip_peak = ledger_.TakeWindowPeak();
    window_peak_before_clip_ = std::max({window_peak_before_clip_, window_so_far, clip_peak});
    if (first) m_.clip_grad_norm_bytes = clip_peak - before;
  }

  void ZeroGrad() {
    const bool to_none = spec_.loop.zero_grad == "none";
    // Every gradient the optimizer steps is the model's or one of the rank's: DataParallel zeroes them
    // as Python's Optimizer.zero_grad does, without LibTorch's detach_(), which a gradient that is a
    // DDP bucket's view refuses ("Can't detach views in-place").
    if (parallel_) return parallel_->ZeroGrad(to_none);
    if (optimizer_) {
      optimizer_->zero_grad(to_none);
      return;
    }
    for (at::Tensor p : params_) {
      if (!p.grad().defined()) continue;
      if (to_none) {
        p.mutable_grad().reset();
      } else {
        p.mutable_grad().zero_();
      }
    }
  }

  // transfer_phase: the phase the host-to-device copy is booked under (kTransfer in training; eval
  // books its own copies under kEval); none: the copy happens later (inside a checkpoint).
  Batch NextBatch(std::optional<Phase> transfer_phase) {
    const bool transfer_now = transfer_phase.has_value();
    if (spec_.data.on_host && transfer_now) SetPhase(ledger_, *transfer_phase);  // the host draws are not booked
    Batch batch = batches_.Next(transfer_now);
    batch_bytes_ = batches_.DeviceBytes(batch, transfer_now);
    return batch;
  }

  // A module's cross_entropy targets are drawn here, shaped like its output without the class axis
  // (Note [The class axis], workload/loop/cross_entropy.h), on the device; a layer list's come with the batch.
  at::Tensor Loss(const at::Tensor& output, const at::Tensor& target) const {
    const std::string& loss = spec_.loop.loss;
    if (loss == "cross_entropy") {
      std::string error;
      const std::optional<ClassAxis> axis =
          ReadClassAxis(output.sizes(), spec_.data.dtype == DType::kInt64, spec_.data.classes, &error);
      if (!axis) throw LossInputError(error);
      const at::Tensor t = target.defined() ? target
                                            : at::randint(0, spec_.data.classes, axis->target_sizes,
                                                          device_options_.dtype(at::kLong));
      return CrossEntropy(output, t, *axis);
    }
    if (loss == "mse") return at::mse_loss(output, at::zeros_like(output));
    return output.mean();
  }

  void KeepLoss(const at::Tensor& loss, const std::string& from) {
    const LossHistorySpec& h = spec_.loop.loss_history;
    if (h.from != from || h.keep == "none") return;
    if (h.keep == "attached") history_.push_back(loss);
    if (h.keep == "detached") history_.push_back(loss.detach());
    if (h.keep == "item" && has_data_) items_.push_back(loss.item<double>());
  }

  void Evaluate() {
    SetPhase(ledger_, Phase::kEval);
    std::vector<at::Tensor> outputs;
    for (int64_t b = 0; b < spec_.loop.eval.batches; ++b) {
      std::optional<at::NoGradGuard> no_grad;
      if (spec_.loop.eval.no_grad) no_grad.emplace();
      Batch batch = NextBatch(Phase::kEval);
      std::optional<AutocastScope> autocast;
      if (autocast_) autocast.emplace(*autocast_);
      at::Tensor output = forward_->Forward(batch, /*training=*/false, nullptr);
      if (spec_.loop.loss_history.from == "eval") KeepLoss(Loss(output, batch.target), "eval");
      if (spec_.loop.eval.keep_outputs) outputs.push_back(output);
    }
    if (observer_) observer_->EvalDone();  // what the evaluation keeps is still alive here
    batch_bytes_ = 0;
  }

  const VariantSpec& spec_;
  const VariantMeasureOptions& options_;
  Ledger& ledger_;
  LayerTrace* trace_;
  RunObserver* observer_;  // may be null
  VariantMeasurement& m_;
  at::TensorOptions device_options_;
  bool has_data_;  // the backend's tensors hold values (not meta)
  BatchMaker batches_;
  std::unique_ptr<Net> net_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<RankStrategy> parallel_;  // the scenario's `parallel`; its hooks are on params_
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::optional<PitfallForward> forward_;  // once net_ and parallel_ exist
  std::vector<at::Tensor> history_;
  std::vector<double> items_;  // loss.item() values: what a history of numbers holds (no tensor)
  int64_t batch_bytes_ = 0;
  std::optional<AutocastSetting> autocast_;  // loop.autocast on the backend's device type
  std::optional<GradScaler> scaler_;         // float16 autocast
  bool warned_of_a_skipped_step_ = false;
  int64_t window_peak_before_clip_ = 0;  // the iteration's peak before clipping took a window of its own
};

}  // namespace

std::unique_ptr<MeasuredRun> MakeVariantRun(const VariantSpec& spec, const VariantMeasureOptions& options,
                                            const BackendSession& backend, LayerTrace* trace, RunObserver* observer,
                                            VariantMeasurement* m) {
  return std::make_unique<VariantRun>(spec, options, backend, trace, observer, m);
}

}  // namespace oomguard
