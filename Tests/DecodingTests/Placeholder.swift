import Testing

@Test func placeholderDecodingTests() {}
