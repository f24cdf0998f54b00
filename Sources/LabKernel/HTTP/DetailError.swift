/// An error answer in FastAPI's shape, which d3chat and the Mozaiks runtime both speak:
/// `{"detail": …}` with its status, a string, or for a body that does not validate (422)
/// a list of `{loc, msg, type}`.
public struct DetailError: Error, Sendable {
    public var status: Int
    public var detail: JSONValue
    public var headers: [HTTPHeader]

    public init(_ status: Int, _ detail: String, headers: [HTTPHeader] = []) {
        self.status = status
        self.detail = .string(detail)
        self.headers = headers
    }

    /// FastAPI's 422: `[{loc, msg, type}]`.
    public static func validation(_ loc: [String], _ message: String, type: String = "value_error") -> DetailError {
        var error = DetailError(422, message)
        error.detail = [["loc": .array(loc.map { .string($0) }), "msg": .string(message), "type": .string(type)]]
        return error
    }

    public var response: HTTPResponseMessage { .json(status, ["detail": detail], headers: headers) }
}
