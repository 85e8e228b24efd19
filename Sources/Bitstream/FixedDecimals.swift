/// `value` with `digits` decimals, rounded half away from zero (what `%.Nf` prints for the
/// magnitudes shown: frame rates, seconds), without Foundation's formatting. Public for the
/// CLI, which words its own figures the way `frametap probe`'s descriptions do.
public func fixed(_ value: Double, _ digits: Int) -> String {
    guard value.isFinite else { return "\(value)" }
    let scale = (0..<digits).reduce(1.0) { result, _ in result * 10 }
    let scaled = (abs(value) * scale).rounded()
    let whole = Int(scaled / scale)
    let fraction = Int(scaled - Double(whole) * scale)
    let sign = value < 0 && scaled > 0 ? "-" : ""
    guard digits > 0 else { return "\(sign)\(whole)" }
    let fractionDigits = String(fraction)
    return "\(sign)\(whole)." + String(repeating: "0", count: max(0, digits - fractionDigits.count)) + fractionDigits
}
