// swift-format-ignore-file: OrderedImports
// First, before Foundation: stdout is a C global Swift 6 cannot prove safe, and it is set up
// here before any other thread runs.
@preconcurrency import Glibc
import Foundation
import RingcastCore
import RingcastCrypto

setvbuf(stdout, nil, _IOLBF, 0)
TerminationSignals.takeOver()
Crypto.install(LibCrypto())
exit(CommandLineTool.run(Array(CommandLine.arguments.dropFirst())))
