import Testing

@Test func placeholderSessionsTests() {}
