#include "diagnose/random_ops.h"

namespace oomguard {

// Asked once per operator, so a switch on the first letter, not a hash of the name.
bool IsRandomOp(std::string_view name) {
  constexpr std::string_view kAten = "aten::";
  if (!name.starts_with(kAten)) return false;
  const std::string_view op = name.substr(kAten.size());
  switch (op.empty() ? '\0' : op[0]) {
    case 'b':
      return op == "bernoulli" || op == "bernoulli_";
    case 'c':
      return op == "cauchy_";
    case 'e':
      return op == "exponential_";
    case 'g':
      return op == "geometric_";
    case 'l':
      return op == "log_normal_";
    case 'm':
      return op == "multinomial";
    case 'n':
      return op == "native_dropout" || op == "normal" || op == "normal_";
    case 'r':
      return op == "rand" || op == "rand_like" || op == "randn" || op == "randn_like" || op == "randint" ||
             op == "randint_like" || op == "randperm" || op == "random_" || op == "rrelu_with_noise";
    case 'u':
      return op == "uniform_";
    default:
      return false;
  }
}

}  // namespace oomguard
