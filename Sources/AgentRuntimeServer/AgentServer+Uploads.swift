import AgentRuntimeWire
import LabCrypto
import LabKernel

extension AgentServer {
    /// `POST /api/chat/upload`, multipart: `file`, `appId`, `userId`, `chatId`, optional
    /// `intent` and `bundle_path`. The bytes are stored (the driver writes them under
    /// `--data`, named by the upload's id, never by the client's filename) and announced on
    /// the chat's sockets as `chat.attachment_uploaded`, a transcript event.
    mutating func upload(_ request: HTTPRequestMessage, now: Instant, _ reply: inout AgentReply) throws -> HTTPResponseMessage {
        let principal = try principal(request, now: now)
        guard let boundary = Multipart.boundary(contentType: request.header("content-type")) else {
            throw RuntimeAPIError(415, "Expected multipart/form-data with a boundary")
        }
        let parts: [Multipart.Part]
        do { parts = try Multipart.parse(request.body, boundary: boundary) } catch {
            throw RuntimeAPIError(400, "Malformed multipart body: \(error.message)")
        }
        func field(_ name: String) throws -> String {
            guard let part = parts.first(where: { $0.name == name && $0.filename == nil }),
                  let text = String(validating: part.data, as: UTF8.self), !text.isEmpty else {
                throw RuntimeAPIError.validation(["body", name], "Field required", type: "missing")
            }
            return text
        }
        let app = try field("appId"), user = try field("userId"), chatID = try field("chatId")
        let intent = try? field("intent"), bundlePath = try? field("bundle_path")
        guard let file = parts.first(where: { $0.name == "file" && $0.filename != nil }) else {
            throw RuntimeAPIError.validation(["body", "file"], "Field required", type: "missing")
        }
        try requireApp(principal, app)
        try requireUser(principal, user)
        let chat = try ownedChat(chatID, app: app, user: user)
        guard file.data.count <= config.maxUploadBytes else {
            throw RuntimeAPIError(413, "File too large: \(file.data.count) bytes, the limit is \(config.maxUploadBytes)")
        }
        guard !file.data.isEmpty else { throw RuntimeAPIError.validation(["body", "file"], "The file is empty") }
        if let intent, intent.utf8.count > 256 { throw RuntimeAPIError.validation(["body", "intent"], "intent is at most 256 characters") }
        if let bundlePath, bundlePath.utf8.count > 512 || bundlePath.contains("..") {
            throw RuntimeAPIError.validation(["body", "bundle_path"], "bundle_path is a relative path of at most 512 characters without '..'")
        }
        let record = UploadRecord(id: newID(), chatID: chat.id, appID: app, userID: user, filename: Self.displayName(file.filename ?? "upload"),
                                  contentType: file.contentType ?? "application/octet-stream", size: file.data.count,
                                  sha256: SHA256.hash(file.data).hexString, intent: intent, bundlePath: bundlePath, createdAt: now)
        state.uploads[record.id] = record
        reply.changes.append(.upload(record, bytes: file.data))
        var data: [String: JSONValue] = ["attachment_id": .string(record.id), "filename": .string(record.filename),
                                         "content_type": .string(record.contentType), "size_bytes": .number(Double(record.size)),
                                         "sha256": .string(record.sha256)]
        if let intent { data["intent"] = .string(intent) }
        if let bundlePath { data["bundle_path"] = .string(bundlePath) }
        emit(chat.id, .attachmentUploaded, data, now: now, &reply)
        save(chat.id, &reply)
        data["chat_id"] = .string(chat.id)
        data["success"] = true
        return .json(200, .object(data))
    }

    /// A filename safe to show and log: its last path component, printable characters
    /// only, at most 128 of them.
    static func displayName(_ name: String) -> String {
        let last = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? "upload"
        let printable = String(last.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(128).map(Character.init))
        return printable.isEmpty || printable == "." || printable == ".." ? "upload" : printable
    }
}
