// ThreadSanitizer support for Debian's Abseil, linked only into -fsanitize=thread
// builds (see tests/tsan/README.md).
//
// Debian's libabsl_synchronization is not compiled with TSan, so TSan cannot
// see that absl::Mutex::Unlock in one thread happens before Lock in another:
// every guarded access would be reported as a race. This file interposes the
// out-of-line entry points of absl::Mutex, absl::CondVar and
// absl::Notification: each calls the library's own implementation (found with
// dlsym(RTLD_NEXT)) and tells TSan the happens-before edge it creates, with
// __tsan_release on the mutex's address before a release and __tsan_acquire
// after an acquire. Conditions passed to Await/LockWhen are wrapped so that
// their evaluation (which absl may run on the unlocking thread) is ordered
// too. This gives race detection on everything the mutexes guard; it does not
// give TSan's lock-order (deadlock) reports.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

#define STOKER_STR2(x) #x
#define STOKER_STR(x) STOKER_STR2(x)
#ifndef ABSL_OPTION_INLINE_NAMESPACE_NAME_STR
#define ABSL_OPTION_INLINE_NAMESPACE_NAME_STR STOKER_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME)
#endif

namespace {

// "absl::<inline namespace>::<cls>::<fn>" mangled by hand (Itanium ABI): the
// inline namespace is Debian's ABI tag (debian3 in bookworm).
std::string Mangled(const char* cls, const char* fn, const char* params, bool is_const) {
  const std::string ns = ABSL_OPTION_INLINE_NAMESPACE_NAME_STR;
  return std::string(is_const ? "_ZNK4absl" : "_ZN4absl") + std::to_string(ns.size()) + ns +
         std::to_string(std::strlen(cls)) + cls + std::to_string(std::strlen(fn)) + fn + params;
}

template <typename F>
F Real(const char* cls, const char* fn, const char* params, bool is_const = false) {
  const std::string name = Mangled(cls, fn, params, is_const);
  void* p = dlsym(RTLD_NEXT, name.c_str());
  if (p == nullptr) {
    std::fprintf(stderr, "tsan absl annotations: %s not found in the Abseil library\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<F>(p);
}

// Calls a condition's function with the mutex's edges around it.
struct Annotated {
  void* mu;
  const absl::Condition* cond;
};
bool EvalAnnotated(Annotated* a) {
  __tsan_acquire(a->mu);
  const bool r = a->cond->Eval();
  __tsan_release(a->mu);
  return r;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// Mangled parameter lists: v = (), RKNS0_9ConditionE = (const Condition&),
// NS0_8DurationE / NS0_4TimeE = (Duration) / (Time), PS0_5MutexE = (Mutex*).
#define STOKER_CONDITION "ERKNS0_9ConditionE"

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>("Mutex", "Lock", "Ev");
  real(this);
  __tsan_acquire(this);
}
void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>("Mutex", "ReaderLock", "Ev");
  real(this);
  __tsan_acquire(this);
}
bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>("Mutex", "TryLock", "Ev");
  const bool r = real(this);
  if (r) __tsan_acquire(this);
  return r;
}
bool Mutex::ReaderTryLock() {
  static auto real = Real<bool (*)(Mutex*)>("Mutex", "ReaderTryLock", "Ev");
  const bool r = real(this);
  if (r) __tsan_acquire(this);
  return r;
}
void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>("Mutex", "Unlock", "Ev");
  __tsan_release(this);
  real(this);
}
void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>("Mutex", "ReaderUnlock", "Ev");
  __tsan_release(this);
  real(this);
}

// Await and LockWhen: the condition is evaluated under the mutex, on this or
// another thread; release before giving up the lock, acquire after.
void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>("Mutex", "Await", STOKER_CONDITION);
  Annotated a{this, &cond};
  __tsan_release(this);
  real(this, Condition(&EvalAnnotated, &a));
  __tsan_acquire(this);
}
bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>("Mutex", "AwaitWithTimeout",
                                                                              STOKER_CONDITION "NS0_8DurationE");
  Annotated a{this, &cond};
  __tsan_release(this);
  const bool r = real(this, Condition(&EvalAnnotated, &a), timeout);
  __tsan_acquire(this);
  return r;
}
bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real =
      Real<bool (*)(Mutex*, const Condition&, absl::Time)>("Mutex", "AwaitWithDeadline", STOKER_CONDITION "NS0_4TimeE");
  Annotated a{this, &cond};
  __tsan_release(this);
  const bool r = real(this, Condition(&EvalAnnotated, &a), deadline);
  __tsan_acquire(this);
  return r;
}
void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>("Mutex", "LockWhen", STOKER_CONDITION);
  Annotated a{this, &cond};
  real(this, Condition(&EvalAnnotated, &a));
  __tsan_acquire(this);
}
void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>("Mutex", "ReaderLockWhen", STOKER_CONDITION);
  Annotated a{this, &cond};
  real(this, Condition(&EvalAnnotated, &a));
  __tsan_acquire(this);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>("Mutex", "LockWhenWithTimeout",
                                                                              STOKER_CONDITION "NS0_8DurationE");
  Annotated a{this, &cond};
  const bool r = real(this, Condition(&EvalAnnotated, &a), timeout);
  __tsan_acquire(this);
  return r;
}
bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>("Mutex", "LockWhenWithDeadline",
                                                                          STOKER_CONDITION "NS0_4TimeE");
  Annotated a{this, &cond};
  const bool r = real(this, Condition(&EvalAnnotated, &a), deadline);
  __tsan_acquire(this);
  return r;
}

void CondVar::Wait(Mutex* mu) {
  static auto real = Real<void (*)(CondVar*, Mutex*)>("CondVar", "Wait", "EPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}
bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static auto real =
      Real<bool (*)(CondVar*, Mutex*, absl::Duration)>("CondVar", "WaitWithTimeout", "EPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool r = real(this, mu, timeout);
  __tsan_acquire(mu);
  return r;
}
bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static auto real =
      Real<bool (*)(CondVar*, Mutex*, absl::Time)>("CondVar", "WaitWithDeadline", "EPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool r = real(this, mu, deadline);
  __tsan_acquire(mu);
  return r;
}

// Notification: Notify happens before every wait that sees it. (The inline
// HasBeenNotified() reads an atomic the library wrote uninstrumented; the
// code under test polls only through the waits below.)
void Notification::Notify() {
  static auto real = Real<void (*)(Notification*)>("Notification", "Notify", "Ev");
  __tsan_release(this);
  real(this);
}
void Notification::WaitForNotification() const {
  static auto real = Real<void (*)(const Notification*)>("Notification", "WaitForNotification", "Ev", true);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}
bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static auto real = Real<bool (*)(const Notification*, absl::Duration)>(
      "Notification", "WaitForNotificationWithTimeout", "ENS0_8DurationE", true);
  const bool r = real(this, timeout);
  __tsan_acquire(const_cast<Notification*>(this));
  return r;
}
bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static auto real = Real<bool (*)(const Notification*, absl::Time)>("Notification", "WaitForNotificationWithDeadline",
                                                                     "ENS0_4TimeE", true);
  const bool r = real(this, deadline);
  __tsan_acquire(const_cast<Notification*>(this));
  return r;
}

ABSL_NAMESPACE_END
}  // namespace absl
