import RingcastCore

/// Checks a JSON value against a schema of `OpenAPI.document`, for the keywords the document uses.
/// Any other keyword is a violation, so a schema cannot pass unchecked. Used by the tests and the fuzz
/// targets; the server never calls it.
public final class SchemaValidator {
    private let document: JSONValue
    private var patterns: [String: SchemaPattern] = [:]
    private static let annotations: Set<String> = ["description", "examples"]

    public init(document: JSONValue = OpenAPI.document) { self.document = document }

    /// The schema of a named component (`Task`, `Error`, …).
    public func component(_ name: String) -> JSONValue? { document["components"]?["schemas"]?[name] }

    /// The first way `value` breaks `schema`, as `at: reason`, or nil when it conforms.
    public func violation(of value: JSONValue, against schema: JSONValue, at path: String = "$") -> String? {
        guard case .object(let keywords) = schema else { return "\(path): the schema is not an object" }
        for (keyword, argument) in keywords {
            if let failure = check(keyword, argument, value, schema, path) { return failure }
        }
        return nil
    }

    private func check(_ keyword: String, _ argument: JSONValue, _ value: JSONValue, _ schema: JSONValue, _ path: String) -> String? {
        switch (keyword, argument) {
        case ("$ref", .string(let reference)):
            let prefix = "#/components/schemas/"
            guard reference.hasPrefix(prefix), let target = component(String(reference.dropFirst(prefix.count))) else {
                return "\(path): unresolved $ref \(reference)"
            }
            return violation(of: value, against: target, at: path)
        case ("type", .string(let name)):
            return matchesType(value, name) ? nil : "\(path): expected \(name), found \(value.typeName)"
        case ("type", .array(let names)):
            return names.contains { if case .string(let name) = $0 { return matchesType(value, name) } else { return false } }
                ? nil : "\(path): expected one of \(String(decoding: JSONWriter.encode(argument), as: UTF8.self)), found \(value.typeName)"
        case ("enum", .array(let options)):
            return options.contains(value) ? nil : "\(path): \(describe(value)) is not one of \(describe(argument))"
        case ("const", _):
            return value == argument ? nil : "\(path): \(describe(value)) is not \(describe(argument))"
        case ("properties", .object(let properties)):
            guard case .object(let members) = value else { return nil }
            // A name given twice counts with its last value, as JSONValue's subscript and the parsers read it.
            var seen: Set<String> = []
            for (name, member) in members.reversed() where seen.insert(name).inserted {
                if let property = properties.last(where: { $0.0 == name })?.1,
                    let failure = violation(of: member, against: property, at: "\(path).\(name)")
                {
                    return failure
                }
            }
            return nil
        case ("required", .array(let names)):
            guard case .object = value else { return nil }
            for case .string(let name) in names where value[name] == nil { return "\(path): \(name) is missing" }
            return nil
        case ("additionalProperties", .bool(false)):
            guard case .object(let members) = value else { return nil }
            var known: [String] = []
            if case .object(let properties)? = schema["properties"] { known = properties.map(\.0) }
            return members.first { !known.contains($0.0) }.map { "\(path): unexpected member \($0.0)" }
        case ("items", _):
            guard case .array(let elements) = value else { return nil }
            for (index, element) in elements.enumerated() {
                if let failure = violation(of: element, against: argument, at: "\(path)[\(index)]") { return failure }
            }
            return nil
        case ("maxItems", .number(let limit)):
            guard case .array(let elements) = value else { return nil }
            return Double(elements.count) <= limit ? nil : "\(path): more than \(Int(limit)) items"
        case ("minItems", .number(let limit)):
            guard case .array(let elements) = value else { return nil }
            return Double(elements.count) >= limit ? nil : "\(path): fewer than \(Int(limit)) items"
        case ("minimum", .number(let bound)):
            guard case .number(let number) = value else { return nil }
            return number >= bound ? nil : "\(path): \(number) is below \(bound)"
        case ("maximum", .number(let bound)):
            guard case .number(let number) = value else { return nil }
            return number <= bound ? nil : "\(path): \(number) is above \(bound)"
        case ("exclusiveMinimum", .number(let bound)):
            guard case .number(let number) = value else { return nil }
            return number > bound ? nil : "\(path): \(number) is not above \(bound)"
        case ("minLength", .number(let limit)):
            guard case .string(let text) = value else { return nil }
            return Double(text.unicodeScalars.count) >= limit ? nil : "\(path): shorter than \(Int(limit)) characters"
        case ("maxLength", .number(let limit)):
            guard case .string(let text) = value else { return nil }
            return Double(text.unicodeScalars.count) <= limit ? nil : "\(path): longer than \(Int(limit)) characters"
        case ("pattern", .string(let pattern)):
            guard case .string(let text) = value else { return nil }
            let compiled: SchemaPattern
            do { compiled = try self.compiled(pattern) } catch { return "\(path): \(error)" }
            return compiled.matches(text) ? nil : "\(path): \(describe(value)) does not match \(pattern)"
        case ("oneOf", .array(let choices)):
            let matching = choices.filter { violation(of: value, against: $0, at: path) == nil }.count
            if matching == 1 { return nil }
            if matching > 1 { return "\(path): matches \(matching) schemas of a oneOf" }
            // Say why the closest choice refused it: the one whose enum `type` names the value's type.
            let failures = choices.compactMap { violation(of: value, against: $0, at: path) }
            return failures.first { !$0.contains(" is not one of ") } ?? failures.first ?? "\(path): matches no schema of a oneOf"
        default:
            if SchemaValidator.annotations.contains(keyword) { return nil }
            return "\(path): unsupported schema keyword \(keyword)"
        }
    }

    private func matchesType(_ value: JSONValue, _ name: String) -> Bool {
        switch (name, value) {
        case ("null", .null), ("boolean", .bool), ("number", .number), ("string", .string), ("array", .array), ("object", .object):
            return true
        case ("integer", .number(let number)):
            return number == number.rounded()
        default:
            return false
        }
    }

    private func compiled(_ pattern: String) throws(SchemaPatternError) -> SchemaPattern {
        if let compiled = patterns[pattern] { return compiled }
        let compiled = try SchemaPattern(pattern)
        patterns[pattern] = compiled
        return compiled
    }

    private func describe(_ value: JSONValue) -> String {
        String(String(decoding: JSONWriter.encode(value), as: UTF8.self).prefix(80))
    }
}
