// Which layer a failing op belongs to, for error messages: the layer whose forward was running, or,
// in backward, the layer whose forward created the autograd node that was running.
//
//   oomguard::LayerTrace trace;                 // watches backward nodes (ops/op_stream.h)
//   net.set_trace(&trace);                      // the net's forward reports each segment it enters
//   ... an op throws ...
//   trace.Locate();                              // "in the backward of layer 0:embedding, node EmbeddingBackward0"
//   (or "in the forward of layer 2:linear", "in the loss", "in the backward of the loss, node ...")
//
// Backward nodes are matched to layers by autograd sequence numbers: every node a layer's forward
// creates has a number at or above the counter's value when the layer started, and below its value when
// the layer exited (ATen/SequenceNumber.h). A node made outside every bracket is nobody's: "the backward
// node X" (Note [Nodes made between brackets]).
// One trace at a time per process (the callback is global); construct and destroy it on the
// controlling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace oomguard {

class LayerTrace {
 public:
  LayerTrace();
  ~LayerTrace();
  LayerTrace(const LayerTrace&) = delete;
  LayerTrace& operator=(const LayerTrace&) = delete;

  // A net's forward brackets each segment (LayerNet: layer) with EnterLayer/Exit, a net that runs whole
  // its forward with EnterForward/Exit ("module GPT"), the workload brackets the loss and the optimizer
  // step with EnterStage/Exit ("the loss"); an exception skips Exit, which is the point.
  void EnterLayer(const std::string& layer);     // "the forward of layer <layer>"
  void EnterForward(const std::string& what);    // "the forward of <what>"
  void EnterStage(const std::string& stage);     // "<stage>"
  void Exit();

  // Where the most recent failure happened, as a phrase; empty when nothing is known.
  std::string Locate() const;
  // Where the controlling thread is now, as Enter set it ("the forward of layer 2:linear", "the loss");
  // empty between them. For observers that run on that thread (op callbacks of the forward).
  const std::string& current() const { return current_; }
  // How many times current() has changed: an observer that keeps what it made of current() asks
  // again only when this moved.
  uint64_t moves() const { return moves_.load(std::memory_order_acquire); }

  // Told where the program is whenever that changes: on this thread at each Enter/Exit ("the forward
  // of layer 2:linear", "the loss", "" after Exit), and at the start of each backward node, on the
  // engine's thread ("the backward of layer 2:linear, node AddmmBackward0"). The allocation trace
  // names where memory was allocated with it. Set it before a run; an empty function clears it.
  using LocationListener = std::function<void(const std::string& location)>;
  void SetLocationListener(LocationListener listener);
  // For the backward-node callback only: tells the listener that node `name` started.
  void ReportBackwardNode(const std::string& name, int64_t sequence_nr) const;

  struct BackwardNodes;

 private:
  struct Start {
    uint64_t first_sequence_nr;
    std::string what;  // "layer 2:linear", "the loss"; empty: an Exit, nodes from here on are nobody's
  };
  void Enter(std::string what, bool is_forward);
  void Record(std::string what);
  std::string OwnerOfNode(int64_t sequence_nr) const;

  std::unique_ptr<BackwardNodes> backward_nodes_;
  std::string current_;  // "the forward of layer 2:linear", "the loss"; empty between them
  std::atomic<uint64_t> moves_{0};
  std::vector<Start> starts_;  // in order of entry and exit, so by sequence number
  LocationListener listener_;
};

}  // namespace oomguard
