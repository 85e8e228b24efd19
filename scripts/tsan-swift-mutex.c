// Tells ThreadSanitizer about the contended path of Swift's Synchronization.Mutex on Linux, so
// that `make sanitize` does not report every access under a contended Mutex as a data race.
//
// Mutex's fast paths are inlined into our (instrumented) code as an atomic compare-exchange on
// the handle, which TSan sees as acquire/release. Its slow paths, `_MutexHandle._lockSlow` and
// `_unlockSlow` in libswiftSynchronization.so, are not instrumented, and they take and release
// the lock in the kernel (FUTEX_LOCK_PI / FUTEX_UNLOCK_PI), so TSan never sees that handover:
// after a contended lock it reports the protected accesses on both sides as races.
//
// Preloaded (LD_PRELOAD) into a TSan-built binary, this library defines those two symbols,
// forwards to the real ones (dlsym RTLD_NEXT), and annotates the handle's address exactly as
// the inlined fast path's atomics do: __tsan_acquire after taking the lock, __tsan_release
// before giving it up. The handle is passed by address in the Swift `self` register (it holds
// an Atomic, so it is address-only); clang's swiftcall and swift_context (LLVM swiftself) attributes say so.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SWIFTCALL __attribute__((swiftcall))
#define SWIFT_SELF __attribute__((swift_context))  // LLVM swiftself: the r13 self register

// Weak: in a process without TSan (the `swift test` driver inherits LD_PRELOAD too) they are
// null and the shim only forwards.
__attribute__((weak)) void __tsan_acquire(void *address);
__attribute__((weak)) void __tsan_release(void *address);

typedef SWIFTCALL void (*lock_slow_fn)(uint32_t self_id, SWIFT_SELF void *handle);
typedef SWIFTCALL void (*unlock_slow_fn)(SWIFT_SELF void *handle);

static void *real(const char *name) {
    void *symbol = dlsym(RTLD_NEXT, name);
    if (!symbol) {
        fprintf(stderr, "tsan-swift-mutex: %s not found (Swift runtime changed?)\n", name);
        abort();
    }
    return symbol;
}

// Synchronization._MutexHandle._lockSlow(_: UInt32)
SWIFTCALL void $s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF(uint32_t self_id, SWIFT_SELF void *handle) {
    static lock_slow_fn lock_slow;
    if (!lock_slow) lock_slow = (lock_slow_fn)real("$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF");
    lock_slow(self_id, handle);
    if (__tsan_acquire) __tsan_acquire(handle);
}

// Synchronization._MutexHandle._unlockSlow()
SWIFTCALL void $s15Synchronization12_MutexHandleV11_unlockSlowyyF(SWIFT_SELF void *handle) {
    static unlock_slow_fn unlock_slow;
    if (!unlock_slow) unlock_slow = (unlock_slow_fn)real("$s15Synchronization12_MutexHandleV11_unlockSlowyyF");
    if (__tsan_release) __tsan_release(handle);
    unlock_slow(handle);
}
