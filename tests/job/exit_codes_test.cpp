// The exit-code table's rows that do not need a training run: how an exception that ends a
// command maps to a code (one case per row), and the folder lock that makes "busy".
#include "nightlora/job/exit_codes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <new>
#include <stdexcept>
#include <memory>
#include <thread>

#include <unistd.h>

#include "nightlora/job/folder_lock.h"
#include "nightlora/util/error.h"
#include "test_util.h"

namespace {

namespace ec = nl::exit_code;

template <class E>
ec::ExceptionExit exit_for(const E& e) {
  return ec::exit_for_exception(std::make_exception_ptr(e));
}

TEST(ExitCodes, EachExceptionMapsToItsRow) {
  EXPECT_EQ(exit_for(nl::Error("data.jsonl:3: malformed")).code, ec::kBadInput);
  EXPECT_EQ(exit_for(nl::Error("data.jsonl:3: malformed")).message, "nightlora: error: data.jsonl:3: malformed");
  EXPECT_EQ(exit_for(nl::FolderBusy("run/.lock: busy")).code, ec::kBusy);
  EXPECT_EQ(exit_for(std::bad_alloc()).code, ec::kBadInput);
  // Anything that is not ours is a bug, said as such.
  const ec::ExceptionExit internal = exit_for(std::logic_error("vector::at"));
  EXPECT_EQ(internal.code, ec::kInternal);
  EXPECT_EQ(internal.message, "nightlora: internal error: vector::at");
  EXPECT_EQ(ec::exit_for_exception(std::make_exception_ptr(42)).code, ec::kInternal);
  EXPECT_EQ(ec::signal_code(2), 130);
  EXPECT_EQ(ec::signal_code(15), 143);
  EXPECT_EQ(ec::kStopped, 75);
  EXPECT_EQ(ec::kDiverged, 3);
}

TEST(FolderLock, HeldUntilReleasedAndNamesItsHolder) {
  nltest::TempDir td;
  {
    nl::FolderLock first(td.path.string(), "training run");
    // flock(2) locks belong to open file descriptions: a second lock in this process conflicts
    // like one in another process would.
    try {
      nl::FolderLock second(td.path.string(), "training run");
      FAIL() << "a second lock on the same folder was granted";
    } catch (const nl::FolderBusy& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("another training run"), std::string::npos) << what;
      EXPECT_NE(what.find("process " + std::to_string(::getpid())), std::string::npos) << what;
    }
    // Waiting a little is still refused while the holder lives.
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(nl::FolderLock(td.path.string(), "training run", 0.3), nl::FolderBusy);
    EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.25);
  }
  // Released with the object: the next one gets it at once.
  nl::FolderLock again(td.path.string(), "training run");
  EXPECT_EQ(again.path(), (td.path / ".lock").string());
}

TEST(FolderLock, AWaiterGetsTheLockWhenTheHolderLetsGo) {
  nltest::TempDir td;
  auto first = std::make_unique<nl::FolderLock>(td.path.string(), "nightly job");
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    first.reset();
  });
  // Waits up to 30 s; the holder lets go after 0.3 s. Throws (fails the test) if the lock
  // is not handed over.
  EXPECT_NO_THROW(nl::FolderLock(td.path.string(), "nightly job", 30.0));
  release.join();
}

}  // namespace
