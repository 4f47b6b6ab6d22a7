package simnet

// nicQueues is the NIC's side of Timing.NetStage for the connections 0..n−1 of an executor: per
// connection the messages its CTA has written and the next one its NIC carries, one at a time (a
// queue pair executes its work requests in order). The compact executors number their messages
// per connection, so counters stand for the queue.
type nicQueues struct {
	written, next []int32
	busy          []bool
}

func newNICQueues(n int) nicQueues {
	return nicQueues{written: make([]int32, n), next: make([]int32, n), busy: make([]bool, n)}
}

// wrote records that connection c's CTA has written its next message.
func (q *nicQueues) wrote(c int) { q.written[c]++ }

// take returns the number of the message connection c's NIC carries next and marks it on the
// route; false where one is on the route already or none is waiting.
func (q *nicQueues) take(c int) (int32, bool) {
	if q.busy[c] || q.next[c] >= q.written[c] {
		return 0, false
	}
	q.busy[c] = true
	return q.next[c], true
}

// left records that connection c's message on the route has left it.
func (q *nicQueues) left(c int) {
	q.busy[c] = false
	q.next[c]++
}
