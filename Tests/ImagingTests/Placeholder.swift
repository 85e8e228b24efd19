import Testing

@Test func placeholderImagingTests() {}
