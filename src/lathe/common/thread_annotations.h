// Clang's thread-safety attributes (clang.llvm.org/docs/ThreadSafetyAnalysis.html)
// behind macros: what a mutex guards, which functions need it held, which take
// or drop it. scripts/check_thread_safety.sh compiles the classes that use them
// with `clang++ -Wthread-safety`, which then refuses an access without the lock.
// Under gcc every macro is empty: the annotations cost nothing and check nothing.
//
// The types that carry the capability are in mutex.h (lathe::Mutex, MutexLock,
// CondVar): libstdc++'s std::mutex has no attributes for clang to follow.
#pragma once

#if defined(__clang__)
#define LATHE_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define LATHE_THREAD_ATTRIBUTE(x)
#endif

// On a class: its objects are a capability (a mutex), named `x` in warnings.
#define CAPABILITY(x) LATHE_THREAD_ATTRIBUTE(capability(x))

// On an RAII class: constructing it acquires, destroying it releases.
#define SCOPED_CAPABILITY LATHE_THREAD_ATTRIBUTE(scoped_lockable)

// On a member: read or written only with the capability held.
#define GUARDED_BY(x) LATHE_THREAD_ATTRIBUTE(guarded_by(x))

// On a pointer member: what it points to is read or written only with the
// capability held (the pointer itself is not guarded).
#define PT_GUARDED_BY(x) LATHE_THREAD_ATTRIBUTE(pt_guarded_by(x))

// On a function: the caller holds the capability, which it still holds on return.
#define REQUIRES(...) LATHE_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))

// On a function: the caller must not hold the capability (the function takes it).
#define EXCLUDES(...) LATHE_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))

// On a function: it returns with the capability held that it was called without.
// With no argument, on a member function: the object itself.
#define ACQUIRE(...) LATHE_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))

// On a function: it returns with the capability released that it was called with.
#define RELEASE(...) LATHE_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))

// On a function: it acquires the capability when it returns `x` (true/false).
#define TRY_ACQUIRE(...) LATHE_THREAD_ATTRIBUTE(try_acquire_capability(__VA_ARGS__))

// On a function: after it returns the capability is taken to be held (a
// run-time check, or none, where the analysis cannot see the lock).
#define ASSERT_CAPABILITY(x) LATHE_THREAD_ATTRIBUTE(assert_capability(x))

// On a function: it returns a reference to the capability.
#define RETURN_CAPABILITY(x) LATHE_THREAD_ATTRIBUTE(lock_returned(x))

// On a function: the analysis skips its body. Each use says why beside it.
#define NO_THREAD_SAFETY_ANALYSIS LATHE_THREAD_ATTRIBUTE(no_thread_safety_analysis)
