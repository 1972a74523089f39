// SharedBytes factories (base/shared_bytes.h).
#include "base/shared_bytes.h"

#include <algorithm>

namespace flashserve::base {
namespace {

struct OwnedString {
  explicit OwnedString(std::string s) : bytes(std::move(s)), view(bytes) {}
  std::string bytes;
  std::string_view view;
};

struct Borrowed {
  std::shared_ptr<const void> owner;
  std::string_view view;
};

}  // namespace

SharedBytes MakeSharedBytes(std::string bytes) {
  auto holder = std::make_shared<const OwnedString>(std::move(bytes));
  return SharedBytes(holder, &holder->view);
}

SharedBytes ShareBytes(std::shared_ptr<const void> owner, std::string_view bytes) {
  auto holder = std::make_shared<const Borrowed>(Borrowed{std::move(owner), bytes});
  return SharedBytes(holder, &holder->view);
}

SharedBytes SliceBytes(const SharedBytes& bytes, size_t offset, size_t size) {
  const std::string_view all = *bytes;
  offset = std::min(offset, all.size());
  return ShareBytes(bytes, all.substr(offset, size));
}

}  // namespace flashserve::base
