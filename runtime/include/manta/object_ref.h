// ObjectRef<T>: a reference to a value of type T that a task returns or
// Put() stores, possibly not computed yet and possibly in another process.
//
//   manta::ObjectRef<int> r = manta::Task(Add).Remote(1, 2);
//   manta::ObjectRef<int> copy = r;           // same object
//   int v = *manta::Get(r);
//   manta::Task(Add).Remote(r, 10);           // Add receives the value of r
//
// Copies are cheap and count as references: while any copy lives (in this
// process or, when passed inside a value, in another), the value is kept.
// Copying calls CoreWorker::AddLocalReference and destroying calls
// RemoveLocalReference, balanced, whenever a core worker exists.
//
// Serializable (msgpack): a ref nested in an argument or return value
// reaches the other side as a ref, not as its value.
//
// Thread-safety: like a std::shared_ptr, distinct copies may be used from
// different threads.
#pragma once

#include <string>
#include <utility>

#include <msgpack.hpp>

#include "common/id.h"
#include "manta/internal/core_worker.h"

namespace manta {
namespace internal {

using core::CollectRefs;
using core::ContainedRefs;
using core::RefCollector;
// Lists `info` in the thread's collector (core::ContainedRefs), if any.
void NoteSerializedRef(const core::ObjectRefInfo& info);

// The type-independent part of ObjectRef<T>.
class ObjectRefBase {
 public:
  const ObjectId& ID() const { return info_.id; }
  const core::ObjectRefInfo& Info() const { return info_; }
  bool IsNil() const { return info_.id.IsNil(); }

  template <typename Packer>
  void msgpack_pack(Packer& packer) const {
    packer.pack_array(2);
    packer.pack(info_.id.Binary());
    packer.pack(OwnerAddressForWire());
    if (ContainedRefs() != nullptr && !info_.id.IsNil()) NoteSerializedRef(info_);
  }
  // Throws msgpack::type_error when `o` is not a serialized ref (caught by
  // Deserialize).
  void msgpack_unpack(const msgpack::object& o);

 protected:
  ObjectRefBase() = default;
  // A new reference to `info` (AddLocalReference): SubmitTask/Put hand out
  // refs that no one holds yet.
  explicit ObjectRefBase(core::ObjectRefInfo info);
  ObjectRefBase(const ObjectRefBase& other);
  ObjectRefBase(ObjectRefBase&& other) noexcept;
  ObjectRefBase& operator=(const ObjectRefBase& other);
  ObjectRefBase& operator=(ObjectRefBase&& other) noexcept;
  ~ObjectRefBase();

 private:
  // The owner's address: this process's when the ref is owned here.
  std::string OwnerAddressForWire() const;
  void Release();

  core::ObjectRefInfo info_;
};

}  // namespace internal

template <typename T>
class ObjectRef : public internal::ObjectRefBase {
 public:
  using ValueType = T;
  // A nil ref (no object), e.g. as a placeholder in a container.
  ObjectRef() = default;
  explicit ObjectRef(core::ObjectRefInfo info) : ObjectRefBase(std::move(info)) {}

  friend bool operator==(const ObjectRef& a, const ObjectRef& b) { return a.ID() == b.ID(); }
  friend bool operator!=(const ObjectRef& a, const ObjectRef& b) { return a.ID() != b.ID(); }
};

namespace internal {
template <typename T>
struct IsObjectRef : std::false_type {};
template <typename T>
struct IsObjectRef<ObjectRef<T>> : std::true_type {};
}  // namespace internal

}  // namespace manta
