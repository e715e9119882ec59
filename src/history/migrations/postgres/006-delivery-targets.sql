-- The targets (the webhook, each chat of docs/api.md §16) a delivery has reached already: a retry goes only to the others.
ALTER TABLE deliveries ADD COLUMN done_targets TEXT NOT NULL DEFAULT '';
