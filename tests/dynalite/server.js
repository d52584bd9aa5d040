// dynalite (an implementation of DynamoDB's API on LevelDB, in memory here) on a loopback
// port the OS picks; prints the port for the test fixture (tests/dynalite_engine.py).
// Tables become ACTIVE at once: the tests create one per test.
const dynalite = require('dynalite')

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
server.listen(0, '127.0.0.1', () => {
  console.log('dynalite listening on port ' + server.address().port)
})
// Ends with the test process: its pipe to our stdin closes.
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
