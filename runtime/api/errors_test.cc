#include "manta/errors.h"

#include "gtest/gtest.h"

namespace manta {
namespace {

TEST(ErrorTypeTest, PayloadRoundTrip) {
  for (ErrorType type :
       {ErrorType::kApplicationError, ErrorType::kWorkerDied, ErrorType::kActorDied, ErrorType::kOwnerDied,
        ErrorType::kInfeasible, ErrorType::kObjectLost, ErrorType::kTaskCancelled, ErrorType::kNodeDied,
        ErrorType::kInvalidArgument, ErrorType::kTimeout}) {
    absl::Status status = core::MakeError(type, "boom");
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(status.message(), "boom");
    EXPECT_EQ(core::GetErrorType(status), type);
  }
  EXPECT_EQ(core::GetErrorType(absl::OkStatus()), ErrorType::kNone);
  EXPECT_EQ(core::GetErrorType(absl::InternalError("x")), ErrorType::kNone);
  EXPECT_TRUE(absl::IsDeadlineExceeded(core::MakeError(ErrorType::kTimeout, "t")));
}

template <typename E>
void ExpectThrows(ErrorType type) {
  try {
    internal::ThrowError(core::MakeError(type, "remote message"));
    FAIL() << "no exception";
  } catch (const E& e) {
    EXPECT_STREQ(e.what(), "remote message");
    EXPECT_EQ(e.status().message(), "remote message");
  } catch (...) {
    FAIL() << "wrong exception type for " << static_cast<int>(type);
  }
}

TEST(ThrowErrorTest, EachTypeHasItsException) {
  ExpectThrows<ApplicationError>(ErrorType::kApplicationError);
  ExpectThrows<WorkerDiedError>(ErrorType::kWorkerDied);
  ExpectThrows<NodeDiedError>(ErrorType::kNodeDied);
  ExpectThrows<ActorDiedError>(ErrorType::kActorDied);
  ExpectThrows<OwnerDiedError>(ErrorType::kOwnerDied);
  ExpectThrows<InfeasibleError>(ErrorType::kInfeasible);
  ExpectThrows<ObjectLostError>(ErrorType::kObjectLost);
  ExpectThrows<TaskCancelledError>(ErrorType::kTaskCancelled);
  ExpectThrows<GetTimeoutError>(ErrorType::kTimeout);
  ExpectThrows<TaskError>(ErrorType::kInvalidArgument);
}

TEST(ThrowErrorTest, UntypedStatusIsPlainError) {
  try {
    internal::ThrowError(absl::FailedPreconditionError("not initialized"));
  } catch (const TaskError&) {
    FAIL() << "an untyped status is not a task error";
  } catch (const Error& e) {
    EXPECT_TRUE(absl::IsFailedPrecondition(e.status()));
  }
}

}  // namespace
}  // namespace manta
