// SharedBytes: immutable bytes shared between owners without copying, as a shared pointer to a
// string_view whose memory the pointer keeps alive. Made from a std::string (moved in) or from
// memory another owner keeps (a pooled read buffer, a slice of a larger one), so a payload read
// from disk can be handed to a cache, a network sender and a decoder without a copy. Value
// types; a SharedBytes may be read from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace flashserve::base {

using SharedBytes = std::shared_ptr<const std::string_view>;

// Takes the string's bytes (no copy; one allocation holds the string and its view).
SharedBytes MakeSharedBytes(std::string bytes);
// `bytes` must lie in memory that `owner` keeps alive; the result shares owner's lifetime.
SharedBytes ShareBytes(std::shared_ptr<const void> owner, std::string_view bytes);
// The sub-range [offset, offset + size) of `bytes` (not null), sharing its owner (clamped to
// its end).
SharedBytes SliceBytes(const SharedBytes& bytes, size_t offset, size_t size);

}  // namespace flashserve::base
