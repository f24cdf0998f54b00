/// Where a string's UTF-8 bytes live (0 for nil): two strings with one address share one
/// storage. For tests that check a server keeps a repeated text once.
public func storageAddress(of text: String?) -> UInt {
    guard var text else { return 0 }
    return text.withUTF8 { UInt(bitPattern: $0.baseAddress) }
}
