// Conversation state reuse: a session keeps the sequence state of the last fully finished
// response together with the exact token tape it has consumed. A new prompt that strictly extends
// that tape continues from the state (only the new suffix is prefilled); a target whose state can
// be cut back keeps the part of the tape the prompt shares; anything else starts over. Exact by
// construction: the state is the one a full prefill of the kept tokens would produce.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace sluice::runtime {

// How much of `prompt` an existing tape lets us skip: tape.size() when the prompt strictly
// extends the tape (at least one new token to feed), otherwise 0.
size_t reusable_prefix(std::span<const int32_t> tape, std::span<const int32_t> prompt);

// How many leading tokens a and b share.
size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

// The tape a state holds after generate() finished normally: the prompt and every generated
// token but the last (the last one is pending: decided but not yet fed to the model).
std::vector<int32_t> tape_after(std::span<const int32_t> prompt, std::span<const int32_t> generated);

}  // namespace sluice::runtime
