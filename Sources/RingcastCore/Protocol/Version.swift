/// The release, in one place: `ringcast --version` and `ringcast version`, the `hello` event and
/// `/healthz` (`"server"`), the `ringcast_build_info` metric, and the packages (the Makefile reads
/// the line below).
public enum RingcastVersion {
    public static let version = "0.2.0"
}
