#include "nn/net_sources.h"

#include <mutex>

#include "base/check.h"
#include "base/did_you_mean.h"
#include "nn/layers/layer_net.h"
#include "nn/torchscript/torchscript_net.h"

namespace oomguard {
namespace {

struct NetSource {
  std::string name;
  NetFactory make;
};

// The built-in sources, one line each.
std::vector<NetSource> BuiltInSources() {
  return {
      {"layers", [](const ModelSpec& s, const at::TensorOptions& o) { return std::make_unique<LayerNet>(s, o); }},
      {"torchscript",
       [](const ModelSpec& s, const at::TensorOptions& o) {
         return std::make_unique<TorchScriptNet>(s, o, /*has_data=*/!o.device().is_meta());
       }},
  };
}

struct Registry {
  std::mutex mutex;
  std::vector<NetSource> sources = BuiltInSources();

  const NetSource* Find(const std::string& name) {
    for (const NetSource& s : sources) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }
};

Registry& Sources() {
  static auto* registry = new Registry;  // never destroyed: lookups may outlive static destruction order
  return *registry;
}

}  // namespace

bool RegisterNetSource(const std::string& name, NetFactory make) {
  Registry& r = Sources();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.Find(name) != nullptr) return false;
  r.sources.push_back({name, std::move(make)});
  return true;
}

bool HasNetSource(const std::string& name) {
  Registry& r = Sources();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.Find(name) != nullptr;
}

std::vector<std::string> NetSourceNames() {
  Registry& r = Sources();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const NetSource& s : r.sources) names.push_back(s.name);
  return names;
}

std::unique_ptr<Net> MakeNet(const ModelSpec& spec, const at::TensorOptions& options) {
  NetFactory make;
  {
    Registry& r = Sources();
    std::lock_guard<std::mutex> lock(r.mutex);
    const NetSource* source = r.Find(spec.source);
    if (source != nullptr) make = source->make;
  }
  OOMGUARD_CHECK(make) << "no model source '" << spec.source << "' (sources: " << JoinNames(NetSourceNames(), ", ")
                       << ")";
  std::unique_ptr<Net> net = make(spec, options);
  OOMGUARD_CHECK(net != nullptr) << "model source '" << spec.source << "' built no net";
  return net;
}

}  // namespace oomguard
