// The message of the sluice::Error a callable throws, for tests of refusals.
#pragma once
#include <functional>
#include <string>

#include "core/error.h"

namespace sluice::testing {

// e.what() of the Error `f` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace sluice::testing
