#include "backends/meta/onednn_query.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <oneapi/dnnl/dnnl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace oomguard::onednn {
namespace {

// The C API functions this file calls, found in libtorch_cpu's symbol table (Note [oneDNN on meta]).
struct Api {
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_memory_desc_create_with_strides) md_create_with_strides = nullptr;
  decltype(&dnnl_memory_desc_create_with_tag) md_create_with_tag = nullptr;
  decltype(&dnnl_memory_desc_clone) md_clone = nullptr;
  decltype(&dnnl_memory_desc_destroy) md_destroy = nullptr;
  decltype(&dnnl_memory_desc_get_size) md_get_size = nullptr;
  decltype(&dnnl_memory_desc_equal) md_equal = nullptr;
  decltype(&dnnl_memory_desc_query) md_query = nullptr;
  decltype(&dnnl_memory_desc_permute_axes) md_permute_axes = nullptr;
  decltype(&dnnl_primitive_attr_create) attr_create = nullptr;
  decltype(&dnnl_primitive_attr_destroy) attr_destroy = nullptr;
  decltype(&dnnl_primitive_attr_set_scratchpad_mode) attr_set_scratchpad_mode = nullptr;
  decltype(&dnnl_convolution_forward_primitive_desc_create) conv_forward = nullptr;
  decltype(&dnnl_convolution_backward_data_primitive_desc_create) conv_backward_data = nullptr;
  decltype(&dnnl_convolution_backward_weights_primitive_desc_create) conv_backward_weights = nullptr;
  decltype(&dnnl_deconvolution_forward_primitive_desc_create) deconv_forward = nullptr;
  decltype(&dnnl_deconvolution_backward_data_primitive_desc_create) deconv_backward_data = nullptr;
  decltype(&dnnl_deconvolution_backward_weights_primitive_desc_create) deconv_backward_weights = nullptr;
  decltype(&dnnl_reorder_primitive_desc_create) reorder = nullptr;
  decltype(&dnnl_primitive_desc_query) pd_query = nullptr;
  decltype(&dnnl_primitive_desc_query_md) pd_query_md = nullptr;
  decltype(&dnnl_primitive_desc_destroy) pd_destroy = nullptr;
  dnnl_engine_t engine = nullptr;
  std::string error;  // why the API is unavailable; empty when it is
};

// The loaded object that holds `address`: its path and load bias.
struct LoadedObject {
  uintptr_t address = 0;
  std::string path;
  uintptr_t bias = 0;
};

int FindObject(dl_phdr_info* info, size_t, void* data) {
  auto* object = static_cast<LoadedObject*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_LOAD) continue;
    const uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
    if (object->address >= begin && object->address < begin + segment.p_memsz) {
      object->path = info->dlpi_name;
      object->bias = info->dlpi_addr;
      return 1;
    }
  }
  return 0;
}

// Addresses of the local functions `names` in the loaded object's ELF .symtab.
std::unordered_map<std::string, void*> LocalFunctions(const LoadedObject& object,
                                                      const std::vector<std::string_view>& names, std::string* error) {
  std::unordered_map<std::string, void*> found;
  const int fd = open(object.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + object.path;
    return found;
  }
  struct stat st {};
  void* map = fstat(fd, &st) == 0 ? mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  close(fd);
  if (map == MAP_FAILED) {
    *error = "cannot map " + object.path;
    return found;
  }
  const auto* base = static_cast<const char*>(map);
  const auto* header = reinterpret_cast<const ElfW(Ehdr)*>(base);
  const auto* sections = reinterpret_cast<const ElfW(Shdr)*>(base + header->e_shoff);
  for (int s = 0; s < header->e_shnum; ++s) {
    if (sections[s].sh_type != SHT_SYMTAB) continue;
    const auto* symbols = reinterpret_cast<const ElfW(Sym)*>(base + sections[s].sh_offset);
    const char* strings = base + sections[sections[s].sh_link].sh_offset;
    const size_t count = sections[s].sh_size / sizeof(ElfW(Sym));
    for (size_t i = 0; i < count; ++i) {
      if (ELF64_ST_TYPE(symbols[i].st_info) != STT_FUNC || symbols[i].st_value == 0) continue;
      const char* name = strings + symbols[i].st_name;
      if (std::strncmp(name, "dnnl_", 5) != 0) continue;
      for (std::string_view wanted : names) {
        if (wanted == name) found.emplace(wanted, reinterpret_cast<void*>(object.bias + symbols[i].st_value));
      }
    }
  }
  munmap(map, st.st_size);
  if (found.size() < names.size()) *error = object.path + " has no symbol table with oneDNN's C API";
  return found;
}

Api LoadApi() {
  Api api;
  // libtorch_cpu is the object holding ATen's operators.
  LoadedObject object;
  object.address = reinterpret_cast<uintptr_t>(&at::_ops::empty_memory_format::call);
  if (dl_iterate_phdr(&FindObject, &object) == 0 || object.path.empty()) {
    api.error = "libtorch_cpu not found among the loaded objects";
    return api;
  }
  const std::vector<std::string_view> names = {"dnnl_engine_create",
                                               "dnnl_memory_desc_create_with_strides",
                                               "dnnl_memory_desc_create_with_tag",
                                               "dnnl_memory_desc_clone",
                                               "dnnl_memory_desc_destroy",
                                               "dnnl_memory_desc_get_size",
                                               "dnnl_memory_desc_equal",
                                               "dnnl_memory_desc_query",
                                               "dnnl_memory_desc_permute_axes",
                                               "dnnl_primitive_attr_create",
                                               "dnnl_primitive_attr_destroy",
                                               "dnnl_primitive_attr_set_scratchpad_mode",
                                               "dnnl_convolution_forward_primitive_desc_create",
                                               "dnnl_convolution_backward_data_primitive_desc_create",
                                               "dnnl_convolution_backward_weights_primitive_desc_create",
                                               "dnnl_deconvolution_forward_primitive_desc_create",
                                               "dnnl_deconvolution_backward_data_primitive_desc_create",
                                               "dnnl_deconvolution_backward_weights_primitive_desc_create",
                                               "dnnl_reorder_primitive_desc_create",
                                               "dnnl_primitive_desc_query",
                                               "dnnl_primitive_desc_query_md",
                                               "dnnl_primitive_desc_destroy"};
  const std::unordered_map<std::string, void*> f = LocalFunctions(object, names, &api.error);
  if (!api.error.empty()) return api;
  auto bind = [&f](auto& pointer, const char* name) {
    pointer = reinterpret_cast<std::remove_reference_t<decltype(pointer)>>(f.at(name));
  };
  bind(api.engine_create, "dnnl_engine_create");
  bind(api.md_create_with_strides, "dnnl_memory_desc_create_with_strides");
  bind(api.md_create_with_tag, "dnnl_memory_desc_create_with_tag");
  bind(api.md_clone, "dnnl_memory_desc_clone");
  bind(api.md_destroy, "dnnl_memory_desc_destroy");
  bind(api.md_get_size, "dnnl_memory_desc_get_size");
  bind(api.md_equal, "dnnl_memory_desc_equal");
  bind(api.md_query, "dnnl_memory_desc_query");
  bind(api.md_permute_axes, "dnnl_memory_desc_permute_axes");
  bind(api.attr_create, "dnnl_primitive_attr_create");
  bind(api.attr_destroy, "dnnl_primitive_attr_destroy");
  bind(api.attr_set_scratchpad_mode, "dnnl_primitive_attr_set_scratchpad_mode");
  bind(api.conv_forward, "dnnl_convolution_forward_primitive_desc_create");
  bind(api.conv_backward_data, "dnnl_convolution_backward_data_primitive_desc_create");
  bind(api.conv_backward_weights, "dnnl_convolution_backward_weights_primitive_desc_create");
  bind(api.deconv_forward, "dnnl_deconvolution_forward_primitive_desc_create");
  bind(api.deconv_backward_data, "dnnl_deconvolution_backward_data_primitive_desc_create");
  bind(api.deconv_backward_weights, "dnnl_deconvolution_backward_weights_primitive_desc_create");
  bind(api.reorder, "dnnl_reorder_primitive_desc_create");
  bind(api.pd_query, "dnnl_primitive_desc_query");
  bind(api.pd_query_md, "dnnl_primitive_desc_query_md");
  bind(api.pd_destroy, "dnnl_primitive_desc_destroy");
  if (api.engine_create(&api.engine, dnnl_cpu, 0) != dnnl_success) api.error = "oneDNN made no cpu engine";
  return api;
}

const Api& GetApi() {
  static const Api api = LoadApi();
  return api;
}

const Api& CheckedApi() {
  const Api& api = GetApi();
  TORCH_CHECK(api.error.empty(), "oneDNN's C API is not available: ", api.error);
  return api;
}

void Check(dnnl_status_t status, const char* what) {
  TORCH_CHECK(status == dnnl_success, "oneDNN refused ", what, " (status ", static_cast<int>(status), ")");
}

dnnl_data_type_t DataType(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return dnnl_f32;
    case at::kBFloat16:
      return dnnl_bf16;
    case at::kHalf:
      return dnnl_f16;
    default:
      TORCH_CHECK(false, "oneDNN convolutions take float, bfloat16 or float16, not ", dtype);
  }
}

MemoryDesc Own(dnnl_memory_desc_t md) {
  return MemoryDesc(
      std::shared_ptr<void>(md, [](void* p) { GetApi().md_destroy(static_cast<dnnl_memory_desc_t>(p)); }));
}

MemoryDesc WithTag(const std::vector<int64_t>& dims, at::ScalarType dtype, dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md = nullptr;
  Check(CheckedApi().md_create_with_tag(&md, static_cast<int>(dims.size()), dims.data(), DataType(dtype), tag),
        "a memory descriptor");
  return Own(md);
}

const_dnnl_memory_desc_t Md(const MemoryDesc& desc) { return static_cast<const_dnnl_memory_desc_t>(desc.get()); }

// The user scratchpad attribute ideep gives every primitive it runs.
std::shared_ptr<dnnl_primitive_attr> ScratchpadAttr(bool user) {
  const Api& api = CheckedApi();
  dnnl_primitive_attr_t attr = nullptr;
  Check(api.attr_create(&attr), "an attribute");
  std::shared_ptr<dnnl_primitive_attr> owned(attr, [](dnnl_primitive_attr_t a) { GetApi().attr_destroy(a); });
  if (user) Check(api.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "a user scratchpad");
  return owned;
}

std::shared_ptr<void> OwnPd(dnnl_primitive_desc_t pd) {
  return std::shared_ptr<void>(pd, [](void* p) { GetApi().pd_destroy(static_cast<dnnl_primitive_desc_t>(p)); });
}

}  // namespace

bool Available(std::string* why_not) {
  const Api& api = GetApi();
  if (why_not != nullptr) *why_not = api.error;
  return api.error.empty();
}

MemoryDesc MemoryDesc::Strided(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                               at::ScalarType dtype) {
  dnnl_memory_desc_t md = nullptr;
  Check(CheckedApi().md_create_with_strides(&md, static_cast<int>(dims.size()), dims.data(), DataType(dtype),
                                            strides.data()),
        "a strided memory descriptor");
  return Own(md);
}

MemoryDesc MemoryDesc::Contiguous(const std::vector<int64_t>& dims, at::ScalarType dtype) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<int64_t>(dims[i], 1);
  return Strided(dims, strides, dtype);
}

MemoryDesc MemoryDesc::Any(const std::vector<int64_t>& dims, at::ScalarType dtype) {
  return WithTag(dims, dtype, dnnl_format_tag_any);
}

MemoryDesc MemoryDesc::ChannelsLast(const std::vector<int64_t>& dims, at::ScalarType dtype) {
  return WithTag(dims, dtype, dims.size() == 3 ? dnnl_nwc : dims.size() == 5 ? dnnl_ndhwc : dnnl_nhwc);
}

int64_t MemoryDesc::bytes() const { return defined() ? static_cast<int64_t>(CheckedApi().md_get_size(Md(*this))) : 0; }

bool MemoryDesc::plain() const {
  const Api& api = CheckedApi();
  dnnl_format_kind_t kind = dnnl_format_kind_undef;
  int32_t inner_blocks = 0;
  Check(api.md_query(Md(*this), dnnl_query_format_kind, &kind), "a format kind");
  if (kind != dnnl_blocked) return false;
  Check(api.md_query(Md(*this), dnnl_query_inner_nblks_s32, &inner_blocks), "the inner blocks");
  return inner_blocks == 0;
}

std::vector<int64_t> MemoryDesc::dims() const {
  const Api& api = CheckedApi();
  int32_t ndims = 0;
  const dnnl_dims_t* dims = nullptr;
  Check(api.md_query(Md(*this), dnnl_query_ndims_s32, &ndims), "the rank");
  Check(api.md_query(Md(*this), dnnl_query_dims, &dims), "the dims");
  return std::vector<int64_t>(*dims, *dims + ndims);
}

std::vector<int64_t> MemoryDesc::strides() const {
  const Api& api = CheckedApi();
  int32_t ndims = 0;
  const dnnl_dims_t* strides = nullptr;
  Check(api.md_query(Md(*this), dnnl_query_ndims_s32, &ndims), "the rank");
  Check(api.md_query(Md(*this), dnnl_query_strides, &strides), "the strides");
  return std::vector<int64_t>(*strides, *strides + ndims);
}

MemoryDesc MemoryDesc::Transposed(int a, int b) const {
  std::vector<int> permutation(dims().size());
  for (size_t i = 0; i < permutation.size(); ++i) permutation[i] = static_cast<int>(i);
  std::swap(permutation[a], permutation[b]);
  dnnl_memory_desc_t md = nullptr;
  Check(CheckedApi().md_permute_axes(&md, Md(*this), permutation.data()), "a transposed descriptor");
  return Own(md);
}

bool MemoryDesc::operator==(const MemoryDesc& other) const {
  if (!defined() || !other.defined()) return defined() == other.defined();
  return CheckedApi().md_equal(Md(*this), Md(other)) != 0;
}

Primitive Primitive::ConvForward(const MemoryDesc& src, const MemoryDesc& weights, const MemoryDesc& bias,
                                 const MemoryDesc& dst, const std::vector<int64_t>& strides,
                                 const std::vector<int64_t>& dilates, const std::vector<int64_t>& padding_l,
                                 const std::vector<int64_t>& padding_r, bool user_scratchpad, Op op) {
  const auto attr = ScratchpadAttr(user_scratchpad);
  const bool conv = op == Op::kConvolution;
  dnnl_primitive_desc_t pd = nullptr;
  Check((conv ? CheckedApi().conv_forward : CheckedApi().deconv_forward)(
            &pd, GetApi().engine, dnnl_forward_training, conv ? dnnl_convolution_direct : dnnl_deconvolution_direct,
            Md(src), Md(weights), bias.defined() ? Md(bias) : nullptr, Md(dst), strides.data(), dilates.data(),
            padding_l.data(), padding_r.data(), attr.get()),
        conv ? "a forward convolution" : "a forward deconvolution");
  return Primitive(OwnPd(pd), op);
}

Primitive Primitive::ConvBackwardData(const MemoryDesc& diff_src, const MemoryDesc& weights, const MemoryDesc& diff_dst,
                                      const std::vector<int64_t>& strides, const std::vector<int64_t>& dilates,
                                      const std::vector<int64_t>& padding_l, const std::vector<int64_t>& padding_r,
                                      const Primitive& forward_hint) {
  const auto attr = ScratchpadAttr(true);
  const bool conv = forward_hint.op_ == Op::kConvolution;
  dnnl_primitive_desc_t pd = nullptr;
  Check((conv ? CheckedApi().conv_backward_data : CheckedApi().deconv_backward_data)(
            &pd, GetApi().engine, conv ? dnnl_convolution_direct : dnnl_deconvolution_direct, Md(diff_src), Md(weights),
            Md(diff_dst), strides.data(), dilates.data(), padding_l.data(), padding_r.data(),
            static_cast<dnnl_primitive_desc_t>(forward_hint.handle_.get()), attr.get()),
        conv ? "a backward-data convolution" : "a backward-data deconvolution");
  return Primitive(OwnPd(pd), forward_hint.op_);
}

Primitive Primitive::ConvBackwardWeights(const MemoryDesc& src, const MemoryDesc& diff_weights,
                                         const MemoryDesc& diff_bias, const MemoryDesc& diff_dst,
                                         const std::vector<int64_t>& strides, const std::vector<int64_t>& dilates,
                                         const std::vector<int64_t>& padding_l, const std::vector<int64_t>& padding_r,
                                         const Primitive& forward_hint) {
  const auto attr = ScratchpadAttr(true);
  const bool conv = forward_hint.op_ == Op::kConvolution;
  dnnl_primitive_desc_t pd = nullptr;
  Check(
      (conv ? CheckedApi().conv_backward_weights : CheckedApi().deconv_backward_weights)(
          &pd, GetApi().engine, conv ? dnnl_convolution_direct : dnnl_deconvolution_direct, Md(src), Md(diff_weights),
          diff_bias.defined() ? Md(diff_bias) : nullptr, Md(diff_dst), strides.data(), dilates.data(), padding_l.data(),
          padding_r.data(), static_cast<dnnl_primitive_desc_t>(forward_hint.handle_.get()), attr.get()),
      conv ? "a backward-weights convolution" : "a backward-weights deconvolution");
  return Primitive(OwnPd(pd), forward_hint.op_);
}

Primitive Primitive::Reorder(const MemoryDesc& from, const MemoryDesc& to) {
  const auto attr = ScratchpadAttr(true);
  dnnl_primitive_desc_t pd = nullptr;
  Check(CheckedApi().reorder(&pd, Md(from), GetApi().engine, Md(to), GetApi().engine, attr.get()), "a reorder");
  return Primitive(OwnPd(pd), Op::kConvolution);
}

MemoryDesc Primitive::Desc(Arg arg) const {
  static const std::unordered_map<int, dnnl_query_t> kQueries = {{int(Arg::kSrc), dnnl_query_src_md},
                                                                 {int(Arg::kWeights), dnnl_query_weights_md},
                                                                 {int(Arg::kBias), dnnl_query_weights_md},
                                                                 {int(Arg::kDst), dnnl_query_dst_md},
                                                                 {int(Arg::kDiffSrc), dnnl_query_diff_src_md},
                                                                 {int(Arg::kDiffWeights), dnnl_query_diff_weights_md},
                                                                 {int(Arg::kDiffBias), dnnl_query_diff_weights_md},
                                                                 {int(Arg::kDiffDst), dnnl_query_diff_dst_md},
                                                                 {int(Arg::kScratchpad), dnnl_query_scratchpad_md}};
  const int index = arg == Arg::kBias || arg == Arg::kDiffBias ? 1 : 0;
  const_dnnl_memory_desc_t md =
      CheckedApi().pd_query_md(static_cast<const_dnnl_primitive_desc_t>(handle_.get()), kQueries.at(int(arg)), index);
  if (md == nullptr) return MemoryDesc();
  dnnl_memory_desc_t copy = nullptr;
  Check(GetApi().md_clone(&copy, md), "a descriptor copy");
  return Own(copy);
}

std::string Primitive::implementation() const {
  const char* name = nullptr;
  Check(CheckedApi().pd_query(static_cast<const_dnnl_primitive_desc_t>(handle_.get()), dnnl_query_impl_info_str, 0,
                              &name),
        "the implementation's name");
  return name == nullptr ? "" : name;
}

}  // namespace oomguard::onednn
