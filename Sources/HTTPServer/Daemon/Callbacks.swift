import CMicroHTTPD

#if canImport(Glibc)
    import Glibc
#endif

// libmicrohttpd's C callbacks. They are capture-free closures (so they convert to C function
// pointers) and reach Swift state only through their `cls` pointers: the ServerCore
// (unretained: HTTPServer keeps it alive until after MHD_stop_daemon), a ConnectionContext
// (unretained in *con_cls: ServerCore owns it until NOTIFY_COMPLETED, or until its connection
// closes when libmicrohttpd never reports the request completed) or a StreamResponse
// (retained by the MHD response until its free callback). They live outside main.swift on
// purpose: top-level code there is main-actor isolated and traps when an MHD thread calls
// into it.

/// Called with the request line's target, as the client sent it (libmicrohttpd decodes the
/// `url` it passes the access handler, which would let `%2F` and `%00` change the route). The
/// request's context is made here and becomes its `*con_cls`.
let uriLogCallback: ft_mhd_uri_log_callback = { cls, uri, connection in
    guard let cls, let connection else { return nil }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    var raw: [UInt8] = []
    if let uri {
        let length = strlen(uri)
        raw = Array(UnsafeRawBufferPointer(start: uri, count: length))
        // A NUL inside the target would end FrameTap's copy early and route what is left; kept
        // as a NUL byte, the target is refused as holding a control character.
        if ft_mhd_target_holds_nul(uri, length) != 0 { raw.append(0) }
        // The query is parsed from `raw` (RequestTarget); libmicrohttpd's own copy of it only
        // costs pool memory, and too much of it leaves the request unanswered.
        ft_mhd_skip_argument_parsing(uri)
    }
    return Unmanaged.passUnretained(core.makeContext(connection: connection, rawTarget: raw)).toOpaque()
}

let accessHandlerCallback: MHD_AccessHandlerCallback = {
    cls, connection, url, method, version, uploadData, uploadDataSize, connectionContext in
    guard let cls, let connection, let uploadDataSize, let connectionContext else { return MHD_Result.NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    let context: ConnectionContext
    if let existing = connectionContext.pointee {
        context = Unmanaged<ConnectionContext>.fromOpaque(existing).takeUnretainedValue()
    } else {
        // The URI callback always runs first; this only keeps a surprise from crashing.
        let raw = url.map { Array(UnsafeRawBufferPointer(start: $0, count: strlen($0))) } ?? []
        context = core.makeContext(connection: connection, rawTarget: raw)
        connectionContext.pointee = Unmanaged.passUnretained(context).toOpaque()
    }
    if !context.hasStarted {
        let (headers, defect) = RequestHead.read(connection, method: method)
        return context.headersReceived(
            method: HTTPMethod(method.map { String(cString: $0) } ?? ""),
            version: version.map { String(cString: $0) } ?? "", headers: headers, defect: defect)
    }
    if uploadDataSize.pointee > 0, let uploadData {
        return context.bodyReceived(
            UnsafeRawBufferPointer(start: uploadData, count: uploadDataSize.pointee), size: uploadDataSize)
    }
    return context.requestComplete()
}

let notifyConnectionCallback: MHD_NotifyConnectionCallback = { cls, connection, _, code in
    guard let cls, let connection else { return }
    Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue().connectionNotified(connection, code)
}

let requestCompletedCallback: MHD_RequestCompletedCallback = { _, _, connectionContext, code in
    guard let connectionContext, let existing = connectionContext.pointee else { return }
    connectionContext.pointee = nil
    // ServerCore's reference is dropped inside `completed`; this one keeps it alive until then.
    let context = Unmanaged<ConnectionContext>.fromOpaque(existing).takeUnretainedValue()
    withExtendedLifetime(context) { context.completed(code) }
}

let logCallback: ft_mhd_log_callback = { cls, message in
    guard let cls, let message else { return }
    Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue().log(String(cString: message))
}

let streamReaderCallback: MHD_ContentReaderCallback = { cls, _, buffer, capacity in
    guard let cls, let buffer else { return ft_mhd_reader_end_with_error() }
    return Unmanaged<StreamResponse>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, capacity: capacity)
}

let streamFreeCallback: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    Unmanaged<StreamResponse>.fromOpaque(cls).takeRetainedValue().released()
}

/// Free callback of zero-copy buffer responses: drops the retain taken on the storage.
let releaseRetainedObject: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    Unmanaged<AnyObject>.fromOpaque(cls).release()
}
