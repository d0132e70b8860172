-- The UID of the Node object whose agent last reported under the node's
-- name (the node-uid extra of its reviewed ServiceAccount token, NODE.md
-- 12.10): another UID is a new machine of the same name, and the old one's
-- GPUs are retired. NULL for nodes that report with static tokens.
ALTER TABLE nodes ADD COLUMN node_uid TEXT;
