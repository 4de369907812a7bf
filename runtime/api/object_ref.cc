// Reference counting and wire form of ObjectRef and ActorHandle; Get of
// void refs; the current core worker.
#include "manta/object_ref.h"

#include <string>

#include "manta/actor.h"
#include "manta/api.h"
#include "manta/errors.h"
#include "manta/internal/core.h"
#include "manta/internal/invoke.h"

namespace manta {
namespace core {

RefCollector*& ContainedRefs() {
  thread_local RefCollector* collector = nullptr;
  return collector;
}

}  // namespace core

namespace internal {

core::CoreWorker& RequireCoreWorker() {
  core::CoreWorker* core = core::CoreWorker::Current();
  if (core == nullptr) {
    throw Error(absl::FailedPreconditionError("manta::Init() has not been called (or manta::Shutdown() has)"));
  }
  return *core;
}

namespace {

void AddReference(const ObjectId& id) {
  if (id.IsNil()) return;
  if (core::CoreWorker* core = core::CoreWorker::Current()) core->AddLocalReference(id);
}

}  // namespace

ObjectRefBase::ObjectRefBase(core::ObjectRefInfo info) : info_(std::move(info)) { AddReference(info_.id); }

ObjectRefBase::ObjectRefBase(const ObjectRefBase& other) : info_(other.info_) { AddReference(info_.id); }

ObjectRefBase::ObjectRefBase(ObjectRefBase&& other) noexcept : info_(std::move(other.info_)) {
  other.info_.id = ObjectId();
}

ObjectRefBase& ObjectRefBase::operator=(const ObjectRefBase& other) {
  if (this == &other) return *this;
  AddReference(other.info_.id);
  Release();
  info_ = other.info_;
  return *this;
}

ObjectRefBase& ObjectRefBase::operator=(ObjectRefBase&& other) noexcept {
  if (this == &other) return *this;
  Release();
  info_ = std::move(other.info_);
  other.info_.id = ObjectId();
  return *this;
}

ObjectRefBase::~ObjectRefBase() { Release(); }

void ObjectRefBase::Release() {
  if (info_.id.IsNil()) return;
  if (core::CoreWorker* core = core::CoreWorker::Current()) core->RemoveLocalReference(info_.id);
  info_.id = ObjectId();
}

std::string ObjectRefBase::OwnerAddressForWire() const {
  if (!info_.owner_address.empty()) return info_.owner_address;
  core::CoreWorker* core = core::CoreWorker::Current();
  return core == nullptr ? std::string() : core->address();
}

void ObjectRefBase::msgpack_unpack(const msgpack::object& o) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) throw msgpack::type_error();
  auto id = ObjectId::FromBinary(o.via.array.ptr[0].as<std::string>());
  if (!id.ok()) throw msgpack::type_error();
  std::string owner = o.via.array.ptr[1].as<std::string>();
  Release();
  info_.id = *id;
  info_.owner_address = std::move(owner);
  if (info_.id.IsNil()) return;
  if (core::CoreWorker* core = core::CoreWorker::Current()) core->AddBorrowedReference(info_);
}

void NoteSerializedRef(const core::ObjectRefInfo& info) {
  RefCollector* c = ContainedRefs();
  if (c == nullptr) return;
  c->refs.push_back(info);
  if (c->hold) AddReference(info.id);
}

void UnpackActorHandle(const msgpack::object& o, ActorId* id, std::string* class_name) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 2) throw msgpack::type_error();
  auto parsed = ActorId::FromBinary(o.via.array.ptr[0].as<std::string>());
  if (!parsed.ok()) throw msgpack::type_error();
  *id = *parsed;
  *class_name = o.via.array.ptr[1].as<std::string>();
}

}  // namespace internal

absl::Status TryGet(const ObjectRef<void>& ref, absl::Duration timeout) {
  auto values = internal::RequireCoreWorker().Get({ref.Info()}, timeout);
  return internal::TypedGetError(values.at(0).status());
}

void Get(const ObjectRef<void>& ref, absl::Duration timeout) { internal::ThrowIfError(TryGet(ref, timeout)); }

}  // namespace manta
