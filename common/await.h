// Blocking use of an asynchronous call: Await(start) calls `start` with a
// callback and waits until that callback has run once (on whatever thread,
// possibly before `start` returns), then returns the value it was given.
// For the synchronous twins of callback APIs (DatasetCatalog::Open,
// DataServiceCore::StartSession); never call it on a thread the callback
// needs.
#ifndef STOKER_COMMON_AWAIT_H_
#define STOKER_COMMON_AWAIT_H_

#include <functional>
#include <optional>
#include <utility>

#include "absl/synchronization/notification.h"

namespace stoker {

template <typename T>
T Await(const std::function<void(std::function<void(T)>)>& start) {
  absl::Notification done;
  std::optional<T> result;
  start([&](T value) {
    result.emplace(std::move(value));
    done.Notify();
  });
  done.WaitForNotification();
  return *std::move(result);
}

}  // namespace stoker

#endif  // STOKER_COMMON_AWAIT_H_
