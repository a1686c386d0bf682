import Foundation

/// LeakSanitizer's switch for the calling thread, when the process has one (a `--sanitize=address`
/// build, Tests/sanitizers/run address); otherwise nothing at all.
///
/// For what a library leaks inside one call of ours and no suppression can single out: lws and
/// OpenSSL are built without frame pointers, so the sanitizer's stacks of their allocations end in
/// the library itself, and the only suppression that would match them (`leak:libwebsockets.so`)
/// would also hide everything our callbacks allocate, whose stacks pass through lws too.
enum LeakSanitizer {
    private typealias Switch = @convention(c) () -> Void

    /// Runs `body` with leak checking off for what this thread allocates meanwhile: those blocks are
    /// never reported, and what they point to counts as reachable. Keep `body` to one library call.
    static func ignoringAllocations<Result>(_ body: () throws -> Result) rethrows -> Result {
        guard let process = dlopen(nil, RTLD_NOW) else { return try body() }
        defer { dlclose(process) }
        guard let disable = dlsym(process, "__lsan_disable"), let enable = dlsym(process, "__lsan_enable") else {
            return try body()
        }
        unsafeBitCast(disable, to: Switch.self)()
        defer { unsafeBitCast(enable, to: Switch.self)() }
        return try body()
    }
}
