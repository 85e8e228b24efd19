import Testing

@Test func placeholderH264Tests() {}
