// The message of the sluice::Error a callable throws, for tests of refusals.
#pragma once
#include <gtest/gtest.h>

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

// The same, for a call that must refuse: a call that throws nothing is a test failure.
inline std::string expect_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a sluice::Error";
  return "";
}

}  // namespace sluice::testing
