import Foundation
import Ringcast
import RingcastCore

setvbuf(stdout, nil, _IOLBF, 0)
// SIGINT and SIGTERM are taken with sigwait, so no thread may receive them first; a write to a
// closed socket must fail with EPIPE, not kill the process.
var terminationSignals = sigset_t()
sigemptyset(&terminationSignals)
sigaddset(&terminationSignals, SIGINT)
sigaddset(&terminationSignals, SIGTERM)
pthread_sigmask(SIG_BLOCK, &terminationSignals, nil)
signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
exit(CommandLineTool.run(arguments))
