package awsapi

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SQS is the third emulated API: Amazon SQS as aws-sdk-go-v2/service/sqs
// speaks it, the AWS JSON 1.0 protocol (POST to the endpoint's root,
// X-Amz-Target: AmazonSQS.<Action>, Content-Type application/x-amz-json-1.0,
// errors as {"__type": "com.amazonaws.sqs#<Code>", "message": ...} with the
// Query-compatible code in the x-amzn-query-error header), from the Amazon SQS
// API Reference:
//
//   - CreateQueue, GetQueueUrl, GetQueueAttributes (QueueArn,
//     VisibilityTimeout, ApproximateNumberOfMessages,
//     ApproximateNumberOfMessagesNotVisible), SendMessage, ReceiveMessage,
//     DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility.
//   - ReceiveMessage long-polls up to WaitTimeSeconds (at most 20) and
//     returns at most MaxNumberOfMessages (1 - 10); a received message is
//     invisible for the queue's VisibilityTimeout (default 30 s) or the
//     request's, then visible again with ApproximateReceiveCount one higher;
//     each receipt has its own ReceiptHandle, and only the latest deletes
//     the message: DeleteMessage with an older one succeeds and leaves it
//     ("DeleteMessage", API Reference). ChangeMessageVisibility of a
//     message not in flight is MessageNotInflight. MD5OfBody is the body's
//     MD5, which the SDK checks.
//
// Not emulated: FIFO queues, message attributes, dead-letter queues,
// retention, delays, permissions and tags.
const SQS API = "sqs"

// sqsTargetPrefix prefixes the X-Amz-Target of every SQS request.
const sqsTargetPrefix = "AmazonSQS."

// DefaultVisibilityTimeout is SQS's default visibility timeout of a queue.
const DefaultVisibilityTimeout = 30 * time.Second

type sqsQueue struct {
	name              string
	visibilityTimeout time.Duration
	messages          []*sqsMessage // in the order sent
	sent              []string      // every body ever sent, for QueueHistory
}

type sqsMessage struct {
	id, body  string
	sent      time.Time
	visibleAt time.Time
	receipts  []string // every receipt given, the latest last
	received  int
	firstSeen time.Time // first receipt
}

// CreateQueue creates a standard queue named name (nothing if it exists) and
// returns its ARN.
func (s *Server) CreateQueue(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createQueueLocked(name, DefaultVisibilityTimeout)
	return s.queueARN(name)
}

func (s *Server) createQueueLocked(name string, visibility time.Duration) *sqsQueue {
	if s.queues == nil {
		s.queues = map[string]*sqsQueue{}
	}
	q, ok := s.queues[name]
	if !ok {
		q = &sqsQueue{name: name, visibilityTimeout: visibility}
		s.queues[name] = q
	}
	return q
}

func (s *Server) queueARN(name string) string {
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", s.region, s.accountID, name)
}

// SendMessage puts body on queue as a producer would (EventBridge, or a
// test's malformed message), and returns the message's ID.
func (s *Server) SendMessage(queue, body string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[queue]
	if !ok {
		return "", fmt.Errorf("queue %s: %w", queue, ErrNotFound)
	}
	return s.sendLocked(q, body), nil
}

func (s *Server) sendLocked(q *sqsQueue, body string) string {
	id := uuid(s.nextID())
	q.messages = append(q.messages, &sqsMessage{id: id, body: body, sent: s.clock.Now()})
	q.sent = append(q.sent, body)
	s.wakeReceivers()
	return id
}

// wakeReceivers wakes the long polls waiting for a message; the caller holds
// s.mu.
func (s *Server) wakeReceivers() {
	if s.sqsWake != nil {
		close(s.sqsWake)
	}
	s.sqsWake = make(chan struct{})
}

// QueueMessage is a message on a queue, for tests.
type QueueMessage struct {
	ID, Body string
	// Received is how many times it was received (ApproximateReceiveCount).
	Received int
}

// QueueHistory returns the body of every message ever sent to queue, in
// order, deleted or not: a test sends one again as a duplicate delivery.
func (s *Server) QueueHistory(queue string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q, ok := s.queues[queue]; ok {
		return slices.Clone(q.sent)
	}
	return nil
}

// QueueMessages returns the messages on queue that were not deleted, visible
// or not, in the order sent.
func (s *Server) QueueMessages(queue string) []QueueMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queues[queue]
	if !ok {
		return nil
	}
	out := make([]QueueMessage, 0, len(q.messages))
	for _, m := range q.messages {
		out = append(out, QueueMessage{ID: m.id, Body: m.body, Received: m.received})
	}
	return out
}

type sqsError struct {
	status     int
	code       string // the JSON protocol's shape name
	queryCode  string // the Query protocol's code
	message    string
	senderSide bool
}

func (e *sqsError) Error() string { return e.code + ": " + e.message }

func sqsInvalid(format string, args ...any) *sqsError {
	return &sqsError{http.StatusBadRequest, "InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf(format, args...), true}
}

func sqsMissing(param string) *sqsError {
	return &sqsError{http.StatusBadRequest, "MissingParameter", "MissingParameter", "The request must contain the parameter " + param + ".", true}
}

var errNoQueue = &sqsError{http.StatusBadRequest, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.", true}

// serveSQS answers one SQS request.
func (s *Server) serveSQS(w http.ResponseWriter, r *http.Request) {
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), sqsTargetPrefix)
	reqID := s.requestID()
	fail := func(e *sqsError) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Requestid", reqID)
		side := "Sender"
		if !e.senderSide {
			side = "Receiver"
		}
		w.Header().Set("X-Amzn-Query-Error", e.queryCode+";"+side)
		w.WriteHeader(e.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + e.code, "message": e.message})
	}
	if r.Method != http.MethodPost {
		fail(&sqsError{http.StatusBadRequest, "InvalidAction", "InvalidAction", "SQS JSON requests are POSTs", true})
		return
	}
	h, ok := sqsActions[action]
	if !ok {
		fail(&sqsError{http.StatusBadRequest, "InvalidAction", "InvalidAction", fmt.Sprintf("The action %s is not valid for this endpoint.", action), true})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		fail(sqsInvalid("reading the request: %v", err))
		return
	}
	in := map[string]json.RawMessage{}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			fail(&sqsError{http.StatusBadRequest, "InvalidParameterValue", "SerializationException", "the body is not a JSON object: " + err.Error(), true})
			return
		}
	}
	if apiErr := s.admit(SQS, action); apiErr != nil {
		code := apiErr.Code
		fail(&sqsError{apiErr.Status, code, code, apiErr.Message, apiErr.Status < 500})
		return
	}
	out, serr := h(s, r, sqsInput(in))
	if serr != nil {
		fail(serr)
		return
	}
	if out == nil {
		out = struct{}{}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", reqID)
	_ = json.NewEncoder(w).Encode(out)
}

type sqsInput map[string]json.RawMessage

func (in sqsInput) str(name string) string {
	var v string
	_ = json.Unmarshal(in[name], &v)
	return v
}

// int reads an integer member; ok is false when absent.
func (in sqsInput) int(name string) (n int, ok bool, err *sqsError) {
	raw, ok := in[name]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	if e := json.Unmarshal(raw, &n); e != nil {
		return 0, false, sqsInvalid("Value %s for parameter %s is invalid.", raw, name)
	}
	return n, true, nil
}

type sqsHandler func(s *Server, r *http.Request, in sqsInput) (any, *sqsError)

var sqsActions = map[string]sqsHandler{
	"CreateQueue":             (*Server).sqsCreateQueue,
	"GetQueueUrl":             (*Server).sqsGetQueueURL,
	"GetQueueAttributes":      (*Server).sqsGetQueueAttributes,
	"SendMessage":             (*Server).sqsSendMessage,
	"ReceiveMessage":          (*Server).sqsReceiveMessage,
	"DeleteMessage":           (*Server).sqsDeleteMessage,
	"DeleteMessageBatch":      (*Server).sqsDeleteMessageBatch,
	"ChangeMessageVisibility": (*Server).sqsChangeMessageVisibility,
}

// queueURL is the URL of queue name as this endpoint serves it:
// <scheme>://<host>/<account>/<name>, the form SQS gives.
func (s *Server) queueURL(r *http.Request, name string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/" + s.accountID + "/" + name
}

// queueOf finds the queue a QueueUrl names (by its last path segment); the
// caller holds s.mu.
func (s *Server) queueOf(in sqsInput) (*sqsQueue, *sqsError) {
	raw := in.str("QueueUrl")
	if raw == "" {
		return nil, sqsMissing("QueueUrl")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, sqsInvalid("Value %s for parameter QueueUrl is invalid. Reason: not a URL.", raw)
	}
	q, ok := s.queues[path.Base(u.Path)]
	if !ok {
		return nil, errNoQueue
	}
	return q, nil
}

func (s *Server) sqsCreateQueue(r *http.Request, in sqsInput) (any, *sqsError) {
	name := in.str("QueueName")
	if name == "" {
		return nil, sqsMissing("QueueName")
	}
	visibility := DefaultVisibilityTimeout
	var attrs map[string]string
	_ = json.Unmarshal(in["Attributes"], &attrs)
	if v, ok := attrs["VisibilityTimeout"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 43200 {
			return nil, sqsInvalid("Invalid value for the parameter VisibilityTimeout.")
		}
		visibility = time.Duration(n) * time.Second
	}
	s.mu.Lock()
	s.createQueueLocked(name, visibility)
	s.mu.Unlock()
	return map[string]string{"QueueUrl": s.queueURL(r, name)}, nil
}

func (s *Server) sqsGetQueueURL(r *http.Request, in sqsInput) (any, *sqsError) {
	name := in.str("QueueName")
	if name == "" {
		return nil, sqsMissing("QueueName")
	}
	s.mu.Lock()
	_, ok := s.queues[name]
	s.mu.Unlock()
	if !ok {
		return nil, errNoQueue
	}
	return map[string]string{"QueueUrl": s.queueURL(r, name)}, nil
}

func (s *Server) sqsGetQueueAttributes(_ *http.Request, in sqsInput) (any, *sqsError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueOf(in)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	visible, hidden := 0, 0
	for _, m := range q.messages {
		if now.Before(m.visibleAt) {
			hidden++
		} else {
			visible++
		}
	}
	all := map[string]string{
		"QueueArn":                              s.queueARN(q.name),
		"VisibilityTimeout":                     strconv.Itoa(int(q.visibilityTimeout / time.Second)),
		"ApproximateNumberOfMessages":           strconv.Itoa(visible),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(hidden),
	}
	var names []string
	_ = json.Unmarshal(in["AttributeNames"], &names)
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			out = all
			break
		}
		v, ok := all[n]
		if !ok {
			return nil, &sqsError{http.StatusBadRequest, "InvalidAttributeName", "InvalidAttributeName", "Unknown Attribute " + n + ".", true}
		}
		out[n] = v
	}
	return map[string]any{"Attributes": out}, nil
}

func (s *Server) sqsSendMessage(_ *http.Request, in sqsInput) (any, *sqsError) {
	body := in.str("MessageBody")
	if body == "" {
		return nil, sqsMissing("MessageBody")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueOf(in)
	if err != nil {
		return nil, err
	}
	id := s.sendLocked(q, body)
	return map[string]string{"MessageId": id, "MD5OfMessageBody": md5Hex(body)}, nil
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

type sqsWireMessage struct {
	MessageID     string            `json:"MessageId"`
	ReceiptHandle string            `json:"ReceiptHandle"`
	MD5OfBody     string            `json:"MD5OfBody"`
	Body          string            `json:"Body"`
	Attributes    map[string]string `json:"Attributes,omitempty"`
}

func (s *Server) sqsReceiveMessage(r *http.Request, in sqsInput) (any, *sqsError) {
	maxN, ok, err := in.int("MaxNumberOfMessages")
	if err != nil {
		return nil, err
	}
	if !ok {
		maxN = 1
	}
	if maxN < 1 || maxN > 10 {
		return nil, sqsInvalid("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", maxN)
	}
	waitS, _, err := in.int("WaitTimeSeconds")
	if err != nil {
		return nil, err
	}
	if waitS < 0 || waitS > 20 {
		return nil, sqsInvalid("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", waitS)
	}
	visS, hasVis, err := in.int("VisibilityTimeout")
	if err != nil {
		return nil, err
	}
	if hasVis && (visS < 0 || visS > 43200) {
		return nil, sqsInvalid("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", visS)
	}
	var attrNames []string
	_ = json.Unmarshal(in["AttributeNames"], &attrNames)
	var sysNames []string
	_ = json.Unmarshal(in["MessageSystemAttributeNames"], &sysNames)
	attrNames = append(attrNames, sysNames...)

	s.mu.Lock()
	start := s.clock.Now()
	until := start.Add(time.Duration(waitS) * time.Second)
	for {
		q, qerr := s.queueOf(in)
		if qerr != nil {
			s.mu.Unlock()
			return nil, qerr
		}
		now := s.clock.Now()
		visibility := q.visibilityTimeout
		if hasVis {
			visibility = time.Duration(visS) * time.Second
		}
		var out []sqsWireMessage
		var nextVisible time.Time
		for _, m := range q.messages {
			if len(out) == maxN {
				break
			}
			if now.Before(m.visibleAt) {
				if nextVisible.IsZero() || m.visibleAt.Before(nextVisible) {
					nextVisible = m.visibleAt
				}
				continue
			}
			m.received++
			if m.received == 1 {
				m.firstSeen = now
			}
			m.visibleAt = now.Add(visibility)
			receipt := uuid(s.nextID()) + "#" + m.id
			m.receipts = append(m.receipts, receipt)
			out = append(out, sqsWireMessage{MessageID: m.id, ReceiptHandle: receipt, MD5OfBody: md5Hex(m.body), Body: m.body,
				Attributes: messageAttributes(m, attrNames)})
		}
		if len(out) > 0 || !now.Before(until) {
			s.mu.Unlock()
			if out == nil {
				return map[string]any{}, nil
			}
			return map[string]any{"Messages": out}, nil
		}
		wait := until.Sub(now)
		if !nextVisible.IsZero() && nextVisible.Sub(now) < wait {
			wait = nextVisible.Sub(now)
		}
		if s.sqsWake == nil {
			s.sqsWake = make(chan struct{})
		}
		wake := s.sqsWake
		s.mu.Unlock()
		timer := s.clock.NewTimer(wait)
		select {
		case <-wake:
		case <-timer.C():
		case <-r.Context().Done():
			timer.Stop()
			return map[string]any{}, nil
		}
		timer.Stop()
		s.mu.Lock()
	}
}

// messageAttributes returns the system attributes of m that names ask for.
func messageAttributes(m *sqsMessage, names []string) map[string]string {
	all := map[string]string{
		"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.received),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstSeen.UnixMilli(), 10),
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			return all
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// latest is the receipt handle of m's last receipt.
func (m *sqsMessage) latest() string {
	if len(m.receipts) == 0 {
		return ""
	}
	return m.receipts[len(m.receipts)-1]
}

// messageByReceipt finds the message a receipt handle names; the caller
// holds s.mu.
func (q *sqsQueue) messageByReceipt(receipt string) (int, bool) {
	for i, m := range q.messages {
		if slices.Contains(m.receipts, receipt) {
			return i, true
		}
	}
	return 0, false
}

func (s *Server) sqsDeleteMessage(_ *http.Request, in sqsInput) (any, *sqsError) {
	receipt := in.str("ReceiptHandle")
	if receipt == "" {
		return nil, sqsMissing("ReceiptHandle")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueOf(in)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(receipt, "#") {
		return nil, &sqsError{http.StatusBadRequest, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "The input receipt handle \"" + receipt + "\" is not a valid receipt handle.", true}
	}
	if i, ok := q.messageByReceipt(receipt); ok && q.messages[i].latest() == receipt {
		q.messages = slices.Delete(q.messages, i, i+1)
	}
	// A receipt of a message already deleted, or an older receipt, succeeds
	// and deletes nothing, as on SQS.
	return nil, nil
}

func (s *Server) sqsDeleteMessageBatch(_ *http.Request, in sqsInput) (any, *sqsError) {
	var entries []struct {
		ID            string `json:"Id"`
		ReceiptHandle string `json:"ReceiptHandle"`
	}
	if err := json.Unmarshal(in["Entries"], &entries); err != nil || len(entries) == 0 {
		return nil, &sqsError{http.StatusBadRequest, "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one DeleteMessageBatchRequestEntry in the request.", true}
	}
	if len(entries) > 10 {
		return nil, &sqsError{http.StatusBadRequest, "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10.", true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueOf(in)
	if err != nil {
		return nil, err
	}
	type ok struct {
		ID string `json:"Id"`
	}
	type failed struct {
		ID          string `json:"Id"`
		Code        string `json:"Code"`
		Message     string `json:"Message"`
		SenderFault bool   `json:"SenderFault"`
	}
	succ, fails := []ok{}, []failed{}
	for _, e := range entries {
		if !strings.Contains(e.ReceiptHandle, "#") {
			fails = append(fails, failed{e.ID, "ReceiptHandleIsInvalid", "The input receipt handle is invalid.", true})
			continue
		}
		if i, found := q.messageByReceipt(e.ReceiptHandle); found && q.messages[i].latest() == e.ReceiptHandle {
			q.messages = slices.Delete(q.messages, i, i+1)
		}
		succ = append(succ, ok{e.ID})
	}
	return map[string]any{"Successful": succ, "Failed": fails}, nil
}

func (s *Server) sqsChangeMessageVisibility(_ *http.Request, in sqsInput) (any, *sqsError) {
	receipt := in.str("ReceiptHandle")
	if receipt == "" {
		return nil, sqsMissing("ReceiptHandle")
	}
	secs, ok, err := in.int("VisibilityTimeout")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, sqsMissing("VisibilityTimeout")
	}
	if secs < 0 || secs > 43200 {
		return nil, sqsInvalid("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200.", secs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, qerr := s.queueOf(in)
	if qerr != nil {
		return nil, qerr
	}
	i, found := q.messageByReceipt(receipt)
	if !found {
		return nil, &sqsError{http.StatusBadRequest, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "The input receipt handle \"" + receipt + "\" is not a valid receipt handle.", true}
	}
	if now := s.clock.Now(); !now.Before(q.messages[i].visibleAt) {
		return nil, &sqsError{http.StatusBadRequest, "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", "The message referred to isn't in flight.", true}
	}
	q.messages[i].visibleAt = s.clock.Now().Add(time.Duration(secs) * time.Second)
	s.wakeReceivers()
	return nil, nil
}
