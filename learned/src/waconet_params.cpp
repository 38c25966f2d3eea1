// WacoNetParams: validation, the one-line text form recorded in weights files, named variants.
#include "waco/learned/waconet_params.hpp"

#include "waco/learned/feature_extractor.hpp"

#include <map>
#include <sstream>

#include "waco/kernels/error.hpp"

namespace waco::learned {
namespace {

using kernels::Error;

// Every integer field with its name, in the order of to_string().
template <typename P, typename F>
void for_each_field(P& p, F&& f) {
  f("dims", p.dims);
  f("channels", p.channels);
  f("first_kernel", p.first_kernel);
  f("strided_layers", p.strided_layers);
  f("kernel", p.kernel);
  f("meta_hidden", p.meta_hidden);
  f("meta_out", p.meta_out);
  f("embed_hidden", p.embed_hidden);
  f("embedding", p.embedding);
}

void check_range(const char* field, int v, int lo, int hi) {
  if (v < lo || v > hi)
    throw Error("WACONet parameter " + std::string(field) + " = " + std::to_string(v) +
                    " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                "use a named variant (" + std::string("full, small, tiny") + ") or fix the value");
}

}  // namespace

void WacoNetParams::validate() const {
  check_range("dims", dims, 2, 3);
  check_range("channels", channels, 1, 1024);
  check_range("first_kernel", first_kernel, 1, 9);
  check_range("strided_layers", strided_layers, 0, 30);
  check_range("kernel", kernel, 1, 9);
  check_range("meta_hidden", meta_hidden, 1, 4096);
  check_range("meta_out", meta_out, 1, 4096);
  check_range("embed_hidden", embed_hidden, 1, 4096);
  check_range("embedding", embedding, 1, 4096);
  if (first_kernel % 2 == 0 || kernel % 2 == 0)
    throw Error("WACONet kernel sizes must be odd (first_kernel = " +
                    std::to_string(first_kernel) + ", kernel = " + std::to_string(kernel) + ")",
                "centred sparse convolutions need an odd kernel size");
  if (name.empty() || name.find_first_of(" \t\n=") != std::string::npos)
    throw Error("WACONet variant name '" + name + "' is empty or contains blanks or '='",
                "use a single word such as full or small");
}

std::string WacoNetParams::to_string() const {
  std::ostringstream os;
  os << "name=" << name;
  for_each_field(*this, [&](const char* key, int v) { os << ' ' << key << '=' << v; });
  return os.str();
}

WacoNetParams WacoNetParams::parse(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream is(text);
  std::string tok;
  while (is >> tok) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("WACONet architecture text: '" + tok + "' is not key=value",
                  "the text must come from WacoNetParams::to_string()");
    kv[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  WacoNetParams p;
  auto take = [&](const char* key) {
    auto it = kv.find(key);
    if (it == kv.end())
      throw Error(std::string("WACONet architecture text lacks '") + key + "'",
                  "the text must come from WacoNetParams::to_string()");
    std::string v = it->second;
    kv.erase(it);
    return v;
  };
  p.name = take("name");
  for_each_field(p, [&](const char* key, int& v) {
    const std::string s = take(key);
    std::size_t used = 0;
    try {
      v = std::stoi(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || s.empty())
      throw Error(std::string("WACONet architecture text: ") + key + "='" + s +
                      "' is not an integer");
  });
  if (!kv.empty())
    throw Error("WACONet architecture text has unknown key '" + kv.begin()->first + "'",
                "it may have been written by a newer waco-hybrid");
  p.validate();
  return p;
}

bool WacoNetParams::same_architecture(const WacoNetParams& o) const {
  bool same = true;
  WacoNetParams a = *this;
  WacoNetParams b = o;
  std::vector<int> va, vb;
  for_each_field(a, [&](const char*, int v) { va.push_back(v); });
  for_each_field(b, [&](const char*, int v) { vb.push_back(v); });
  same = va == vb;
  return same;
}

std::vector<std::string> waconet_variant_names() { return {"full", "small", "tiny"}; }

WacoNetParams waconet_variant(std::string_view name, int dims) {
  WacoNetParams p;
  p.name = std::string(name);
  p.dims = dims;
  if (name == "full") {
    // The paper's network (section 4.1.1, Figure 9).
  } else if (name == "small") {
    p.channels = 16;
    p.first_kernel = 3;
  } else if (name == "tiny") {
    p.channels = 8;
    p.first_kernel = 3;
    p.strided_layers = 10;
  } else {
    throw Error("unknown WACONet variant '" + std::string(name) + "'",
                "known variants: full, small, tiny");
  }
  p.validate();
  return p;
}

std::string conv_impl_name(ConvImpl impl) {
  switch (impl) {
    case ConvImpl::Fused: return "fused";
    case ConvImpl::Autograd: return "autograd";
  }
  return "unknown";
}

ConvImpl parse_conv_impl(const std::string& name) {
  if (name == "fused") return ConvImpl::Fused;
  if (name == "autograd") return ConvImpl::Autograd;
  throw Error("unknown sparse convolution implementation '" + name + "'",
              "use fused or autograd");
}

}  // namespace waco::learned
