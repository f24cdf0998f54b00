@testable import Simulator
import Testing

@Suite("Simulator: a value per member device")
struct DeviceTableTests {
    @Test("members' values are set, read and taken as in a dictionary; other devices have none")
    func membersOnly() {
        var table = DeviceTable<String>(members: [7, 2, 5], fleetSize: 9)
        #expect(table.devices.isEmpty && table.values.isEmpty)
        table[5] = "five"
        table[2] = "two"
        #expect(table[5] == "five" && table[2] == "two" && table[7] == nil)
        #expect(table[0] == nil && table[8] == nil && table[-1] == nil && table[9] == nil, "not members, or not in the fleet")
        #expect(table.devices == [2, 5], "ascending, whatever the members' order")
        #expect(table.values == ["two", "five"], "in the members' order")
        #expect(table.removeValue(forKey: 5) == "five" && table[5] == nil && table.devices == [2])
        #expect(table.removeValue(forKey: 5) == nil && table.removeValue(forKey: 3) == nil)
        table[2] = nil
        #expect(table.devices.isEmpty)
    }
}
