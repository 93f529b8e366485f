// Usage errors found after parsing (conflicting or missing flags): the same exit status as
// CLI11's own parse errors (2), so that scripts can tell a wrong command line from a failed run
// (a bad file, a bad model: exit 1).
#pragma once
#include <utility>

#include "core/error.h"

namespace sluice::cli {

struct UsageError : Error {
  using Error::Error;
};

template <typename... Parts>
[[noreturn]] void usage_fail(Parts&&... parts) {
  throw UsageError(cat(std::forward<Parts>(parts)...));
}

}  // namespace sluice::cli
