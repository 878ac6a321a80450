// SPDX-License-Identifier: Apache-2.0
#pragma once
// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html),
// prefixed KILN_. Under Clang, -Wthread-safety (on by default in kiln's Clang builds, CMake option
// KILN_THREAD_SAFETY; `make thread-safety`) checks them at compile time; under other compilers
// they expand to nothing.
//
// The lock types are kiln::Mutex, kiln::MutexLock and kiln::CondVar (base/mutex.h): std::mutex
// is not annotated as a capability in libstdc++, so members guarded by one cannot be checked.
//
//   class Counter {
//    public:
//     void Add(int n) KILN_EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       AddLocked(n);
//     }
//    private:
//     void AddLocked(int n) KILN_REQUIRES(mu_) { total_ += n; }
//     Mutex mu_;
//     int total_ KILN_GUARDED_BY(mu_) = 0;
//   };
//
// What each one says:
//   KILN_GUARDED_BY(mu)          a member (or global) read and written only with `mu` held
//   KILN_PT_GUARDED_BY(mu)       the object a pointer member points to is guarded by `mu`
//   KILN_ACQUIRED_BEFORE(mu...)  lock order: this mutex is taken before those (and
//   KILN_ACQUIRED_AFTER(mu...)   after those); checked by -Wthread-safety-beta only
//   KILN_REQUIRES(mu...)         the function must be called with `mu` held (exclusively)
//   KILN_REQUIRES_SHARED(mu...)  ... held at least shared
//   KILN_EXCLUDES(mu...)         the function must be called without `mu` held (it takes it)
//   KILN_ACQUIRE(mu...)          the function returns with `mu` held that was not held before
//   KILN_ACQUIRE_SHARED(mu...)   (no argument on a capability's own member: `this`)
//   KILN_RELEASE(mu...)          the function releases `mu`, held when it is called
//   KILN_RELEASE_SHARED(mu...)
//   KILN_TRY_ACQUIRE(ok, mu...)  the function acquires `mu` when it returns `ok`
//   KILN_ASSERT_CAPABILITY(mu)   the function checks at run time that `mu` is held
//   KILN_RETURN_CAPABILITY(mu)   the function returns (a reference to) the capability `mu`
//   KILN_CAPABILITY(name)        the class is a lock ("mutex")
//   KILN_SCOPED_CAPABILITY       the class holds a lock for its lifetime (RAII), like MutexLock
//   KILN_NO_THREAD_SAFETY_ANALYSIS  the function's body is not checked: the narrowest escape for
//                                a correct pattern the analysis cannot follow; always say why in
//                                a comment next to it

#if defined(__clang__)
#define KILN_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define KILN_THREAD_ANNOTATION_(x)
#endif

#define KILN_CAPABILITY(x) KILN_THREAD_ANNOTATION_(capability(x))
#define KILN_SCOPED_CAPABILITY KILN_THREAD_ANNOTATION_(scoped_lockable)
#define KILN_GUARDED_BY(x) KILN_THREAD_ANNOTATION_(guarded_by(x))
#define KILN_PT_GUARDED_BY(x) KILN_THREAD_ANNOTATION_(pt_guarded_by(x))
#define KILN_ACQUIRED_BEFORE(...) KILN_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define KILN_ACQUIRED_AFTER(...) KILN_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define KILN_REQUIRES(...) KILN_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define KILN_REQUIRES_SHARED(...) KILN_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#define KILN_EXCLUDES(...) KILN_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define KILN_ACQUIRE(...) KILN_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define KILN_ACQUIRE_SHARED(...) KILN_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define KILN_RELEASE(...) KILN_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define KILN_RELEASE_SHARED(...) KILN_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#define KILN_TRY_ACQUIRE(...) KILN_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define KILN_ASSERT_CAPABILITY(x) KILN_THREAD_ANNOTATION_(assert_capability(x))
#define KILN_RETURN_CAPABILITY(x) KILN_THREAD_ANNOTATION_(lock_returned(x))
#define KILN_NO_THREAD_SAFETY_ANALYSIS KILN_THREAD_ANNOTATION_(no_thread_safety_analysis)
