/// Runs hand-written PTX on the CPU, one thread after another, so that what `JPEGInputKernels`
/// computes is checked on machines without a GPU: every sample they write is compared with the
/// CPU encoder's. It knows the instructions those kernels use (integer arithmetic, `setp`,
/// predicated `bra`, byte loads and stores, parameters and thread indices) and no others: an
/// unknown instruction or an access outside the memory a test lent is an error, never skipped.
/// Threads share no memory and meet at no barrier in these kernels, so running them one after
/// another is what the GPU computes in any order.
///
/// Registers start each thread with junk, as on a GPU, so a kernel that reads one before writing
/// it does not pass by luck. That the PTX assembles for real cards is checked apart from this, by
/// `ptxas` (`scripts/ptx-check.sh`, in `make test` and `make gpu-pack`).
struct PTXInterpreter {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Byte-addressed memory made of the buffers a test lends, at addresses far from zero.
    final class Memory {
        private var buffers: [(base: UInt64, bytes: [UInt8])] = []
        private var next: UInt64 = 0x10_0000_0000

        /// Lends `bytes` at a new address, 4 KiB past the end of the one before, so an access
        /// just outside a buffer touches no other.
        func lend(_ bytes: [UInt8]) -> UInt64 {
            let base = next
            buffers.append((base, bytes))
            next += (UInt64(bytes.count) + 8191) / 4096 * 4096
            return base
        }

        func bytes(at base: UInt64) -> [UInt8] {
            buffers.first { $0.base == base }?.bytes ?? []
        }

        func load(_ address: UInt64) throws(Failure) -> UInt8 {
            let (index, offset) = try locate(address)
            return buffers[index].bytes[offset]
        }

        func store(_ value: UInt8, at address: UInt64) throws(Failure) {
            let (index, offset) = try locate(address)
            buffers[index].bytes[offset] = value
        }

        private func locate(_ address: UInt64) throws(Failure) -> (Int, Int) {
            for (index, buffer) in buffers.enumerated()
            where address >= buffer.base && address < buffer.base + UInt64(buffer.bytes.count) {
                return (index, Int(address - buffer.base))
            }
            throw Failure(description: "access at 0x\(String(address, radix: 16)) is outside every buffer")
        }
    }

    private enum Operand {
        case register(Int)
        case immediate(UInt64)
        case special(Special)
        case parameter(Int)
        case address(register: Int, offset: Int64)
        case label(Int)
    }

    private enum Special {
        case ctaidX, ctaidY, ntidX, ntidY, tidX, tidY
    }

    private struct Instruction {
        let opcode: [Substring]
        let operands: [Operand]
        let guardRegister: Int?
        let guardNegated: Bool
        let text: String
    }

    private struct Kernel {
        let parameters: [String]
        let instructions: [Instruction]
        let registerCount: Int
    }

    private var kernels: [String: Kernel] = [:]

    init(ptx: String) throws(Failure) {
        var lines = ptx.split(separator: "\n").map { $0.trimmed() }.makeIterator()
        while let line = lines.next() {
            guard line.hasPrefix(".visible .entry ") || line.hasPrefix(".entry ") else { continue }
            let name = String(line.split(separator: " ").last!.dropLast())  // "name("
            var parameters: [String] = []
            while let parameter = lines.next(), parameter != ")" {
                guard parameter.hasPrefix(".param ") else { throw Failure(description: "\(name): unexpected \(parameter)") }
                parameters.append(String(parameter.split(separator: " ").last!.filter { $0 != "," }))
            }
            var statements: [String] = []
            var labels: [String: Int] = [:]
            while let statement = lines.next(), statement != "}" {
                if statement.isEmpty || statement == "{" || statement.hasPrefix(".reg ") || statement.hasPrefix("//") { continue }
                if statement.hasSuffix(":") {
                    labels[String(statement.dropLast())] = statements.count
                } else {
                    statements.append(statement)
                }
            }
            var registers: [String: Int] = [:]
            let instructions = try statements.map { statement throws(Failure) in
                try Self.parse(statement, parameters: parameters, labels: labels, registers: &registers)
            }
            kernels[name] = Kernel(parameters: parameters, instructions: instructions, registerCount: registers.count)
        }
    }

    var kernelNames: Set<String> { Set(kernels.keys) }

    /// Runs `name` over a grid of `grid` blocks of `block` threads, as `cuLaunchKernel` would.
    func launch(
        _ name: String, grid: (x: Int, y: Int), block: (x: Int, y: Int), arguments: [UInt64], memory: Memory
    ) throws(Failure) {
        guard let kernel = kernels[name] else { throw Failure(description: "no kernel \(name)") }
        guard arguments.count == kernel.parameters.count else {
            throw Failure(description: "\(name) takes \(kernel.parameters.count) parameters, given \(arguments.count)")
        }
        var registers = [UInt64](repeating: 0, count: kernel.registerCount)
        var junk: UInt64 = 0x2545_F491_4F6C_DD1D
        for blockY in 0..<grid.y {
            for blockX in 0..<grid.x {
                for threadY in 0..<block.y {
                    for threadX in 0..<block.x {
                        let thread = Thread(
                            ctaid: (UInt64(blockX), UInt64(blockY)), ntid: (UInt64(block.x), UInt64(block.y)),
                            tid: (UInt64(threadX), UInt64(threadY)), arguments: arguments)
                        for index in registers.indices {
                            junk = junk &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                            registers[index] = junk
                        }
                        try run(kernel, thread, &registers, memory)
                    }
                }
            }
        }
    }

    private struct Thread {
        let ctaid: (x: UInt64, y: UInt64)
        let ntid: (x: UInt64, y: UInt64)
        let tid: (x: UInt64, y: UInt64)
        let arguments: [UInt64]
    }

    private func run(_ kernel: Kernel, _ thread: Thread, _ registers: inout [UInt64], _ memory: Memory) throws(Failure) {
        func value(_ operand: Operand) throws(Failure) -> UInt64 {
            switch operand {
            case .register(let index): return registers[index]
            case .immediate(let value): return value
            case .parameter(let index): return thread.arguments[index]
            case .special(let special):
                switch special {
                case .ctaidX: return thread.ctaid.x
                case .ctaidY: return thread.ctaid.y
                case .ntidX: return thread.ntid.x
                case .ntidY: return thread.ntid.y
                case .tidX: return thread.tid.x
                case .tidY: return thread.tid.y
                }
            case .address, .label: throw Failure(description: "an address or label where a value belongs")
            }
        }
        func address(_ operand: Operand) throws(Failure) -> UInt64 {
            guard case .address(let register, let offset) = operand else { throw Failure(description: "not an address") }
            return registers[register] &+ UInt64(bitPattern: offset)
        }
        func destination(_ operand: Operand) throws(Failure) -> Int {
            guard case .register(let index) = operand else { throw Failure(description: "not a register") }
            return index
        }
        var counter = 0
        var executed = 0
        while counter < kernel.instructions.count {
            executed += 1
            guard executed < 100_000 else { throw Failure(description: "a thread ran 100,000 instructions") }
            let instruction = kernel.instructions[counter]
            counter += 1
            if let guardRegister = instruction.guardRegister, (registers[guardRegister] != 0) == instruction.guardNegated {
                continue
            }
            let op = instruction.opcode
            let operands = instruction.operands
            let type = op.last.map(String.init) ?? ""
            // Only the types these kernels use; anything else would be read with the wrong width.
            let known = ["u32", "s32", "b32", "u64", "s64", "b64", "pred"]
            guard op[0] == "ret" || op[0] == "bra" || known.contains(type) || (type == "u8" && (op[0] == "ld" || op[0] == "st"))
            else { throw Failure(description: "\(instruction.text): type .\(type) is not interpreted") }
            let bits: UInt64 = type.hasSuffix("32") ? 32 : 64
            let signed = type.hasPrefix("s")
            func fit(_ value: UInt64) -> UInt64 { bits == 32 ? value & 0xFFFF_FFFF : value }
            func asSigned(_ value: UInt64) -> Int64 { bits == 32 ? Int64(Int32(truncatingIfNeeded: value)) : Int64(bitPattern: value) }
            switch op[0] {
            case "ret":
                return
            case "bra":
                guard case .label(let target) = operands[0] else { throw Failure(description: "bra without a label") }
                counter = target
            case "ld" where op[1] == "param" && type == "u64":
                registers[try destination(operands[0])] = try value(operands[1])
            case "ld" where op[1] == "global" && type == "u8":
                registers[try destination(operands[0])] = UInt64(try memory.load(try address(operands[1])))
            case "st" where op[1] == "global" && type == "u8":
                try memory.store(UInt8(truncatingIfNeeded: try value(operands[1])), at: try address(operands[0]))
            case "mov", "cvta":
                registers[try destination(operands[0])] = fit(try value(operands[operands.count - 1]))
            case "cvt":
                // cvt.<to>.<from> between u32 and u64 only (what the kernels use): a signed form
                // would sign-extend, which this does not.
                let to = op[1]
                guard op.count == 3, ["u32", "u64"].contains(to), ["u32", "u64"].contains(op[2]) else {
                    throw Failure(description: "\(instruction.text): only cvt between u32 and u64 is interpreted")
                }
                let source = try value(operands[1])
                let from: UInt64 = op[2].hasSuffix("32") ? source & 0xFFFF_FFFF : source
                registers[try destination(operands[0])] = to.hasSuffix("32") ? from & 0xFFFF_FFFF : from
            case "add", "sub", "mul", "mad", "shl", "shr", "max", "min", "or", "and":
                let a = try value(operands[1])
                let b = try value(operands[2])
                let result: UInt64
                switch op[0] {
                case "add": result = a &+ b
                case "sub": result = a &- b
                case "mul", "mad":
                    guard op[1] == "lo" else { throw Failure(description: "\(instruction.text): only .lo") }
                    let product = a &* b
                    result = op[0] == "mad" ? product &+ (try value(operands[3])) : product
                case "shl": result = b >= bits ? 0 : a << b
                case "shr":
                    if signed {
                        result = UInt64(bitPattern: asSigned(a) >> Int64(min(b, bits - 1)))
                    } else {
                        result = b >= bits ? 0 : fit(a) >> b
                    }
                case "max", "min":
                    let (x, y) = signed ? (asSigned(a), asSigned(b)) : (Int64(bitPattern: fit(a)), Int64(bitPattern: fit(b)))
                    guard signed || bits == 32 else { throw Failure(description: "\(instruction.text): unsigned 64-bit max/min") }
                    result = UInt64(bitPattern: op[0] == "max" ? max(x, y) : min(x, y))
                case "or": result = type == "pred" ? ((a != 0 || b != 0) ? 1 : 0) : a | b
                default: result = type == "pred" ? ((a != 0 && b != 0) ? 1 : 0) : a & b
                }
                registers[try destination(operands[0])] = type == "pred" ? result : fit(result)
            case "setp":
                let a = try value(operands[1])
                let b = try value(operands[2])
                let (x, y) = signed ? (asSigned(a), asSigned(b)) : (0, 0)
                let (ua, ub) = (fit(a), fit(b))
                let holds: Bool
                switch op[1] {
                case "ge": holds = signed ? x >= y : ua >= ub
                case "gt": holds = signed ? x > y : ua > ub
                case "lt": holds = signed ? x < y : ua < ub
                case "le": holds = signed ? x <= y : ua <= ub
                case "eq": holds = ua == ub
                case "ne": holds = ua != ub
                default: throw Failure(description: "\(instruction.text): unknown comparison")
                }
                registers[try destination(operands[0])] = holds ? 1 : 0
            default:
                throw Failure(description: "unknown instruction: \(instruction.text)")
            }
        }
        throw Failure(description: "a thread ran past the last instruction without ret")
    }

    private static func parse(
        _ statement: String, parameters: [String], labels: [String: Int], registers: inout [String: Int]
    ) throws(Failure) -> Instruction {
        guard statement.hasSuffix(";") else { throw Failure(description: "no semicolon: \(statement)") }
        var text = Substring(statement.dropLast())
        var guardRegister: Int?
        var guardNegated = false
        if text.hasPrefix("@") {
            let end = text.firstIndex(of: " ") ?? text.endIndex
            var name = text[text.index(after: text.startIndex)..<end]
            if name.hasPrefix("!") {
                guardNegated = true
                name = name.dropFirst()
            }
            guardRegister = registerIndex(String(name), &registers)
            text = text[end...].drop { $0 == " " }
        }
        let opcodeEnd = text.firstIndex(of: " ") ?? text.endIndex
        let opcode = text[..<opcodeEnd].split(separator: ".")
        let operandText = text[opcodeEnd...].split(separator: ",").map { $0.trimmed() }
        var operands: [Operand] = []
        for item in operandText where !item.isEmpty {
            if item.hasPrefix("[") {
                let inside = item.dropFirst().dropLast()
                if let index = parameters.firstIndex(of: String(inside)) {
                    operands.append(.parameter(index))
                } else {
                    let parts = inside.split(separator: "+")
                    let offset = parts.count > 1 ? Int64(parts[1]) : 0
                    guard let offset, parts[0].hasPrefix("%") else { throw Failure(description: "address \(item)") }
                    operands.append(.address(register: registerIndex(String(parts[0]), &registers), offset: offset))
                }
            } else if item.hasPrefix("%") {
                let specials: [String: Special] = [
                    "%ctaid.x": .ctaidX, "%ctaid.y": .ctaidY, "%ntid.x": .ntidX, "%ntid.y": .ntidY, "%tid.x": .tidX,
                    "%tid.y": .tidY,
                ]
                if let special = specials[item] {
                    operands.append(.special(special))
                } else if item.contains(".") {
                    throw Failure(description: "unknown special register \(item)")
                } else {
                    operands.append(.register(registerIndex(item, &registers)))
                }
            } else if let number = Int64(item) {
                operands.append(.immediate(UInt64(bitPattern: number)))
            } else if let target = labels[item] {
                operands.append(.label(target))
            } else {
                throw Failure(description: "unknown operand \(item) in \(statement)")
            }
        }
        return Instruction(
            opcode: opcode, operands: operands, guardRegister: guardRegister, guardNegated: guardNegated, text: statement)
    }

    private static func registerIndex(_ name: String, _ registers: inout [String: Int]) -> Int {
        if let index = registers[name] { return index }
        registers[name] = registers.count
        return registers.count - 1
    }
}

extension StringProtocol {
    /// Without the spaces and tabs at either end.
    fileprivate func trimmed() -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(String(drop(while: blank).reversed()).drop(while: blank).reversed())
    }
}
