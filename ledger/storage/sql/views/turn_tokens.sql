-- One row per agent turn and its tokens: the one definition of "tokens" that every view, guard and
-- screen uses. tokens = input + output + cache_creation + cache_read: every token the model read or
-- wrote in the turn (what the token_budget guard counts); cache = cache_creation + cache_read.
-- A sub-agent's run (subagent_stopped: Claude Code's SubagentStop) is a turn of its parent loop's
-- iteration: its tokens count there, beside the agent's own turns. So does a run that hit a usage or
-- rate limit (rate_limited): not an iteration, but what it spent was spent. So do the tokens a run
-- spent on models other than its turn's own (model_tokens: Gemini CLI's router), each at its model.
-- prompt = input + cache: the input tokens the model read, cache included (what a price tier and
-- the context window count). model, reported_cost_usd and context_tokens (the input tokens, cache
-- included, of the turn's last request; NULL: not known) are what the agent said (turn_costs).
SELECT
  session_id,
  iteration,
  seq,
  tokens.input AS input,
  tokens.output AS output,
  tokens.cache_creation + tokens.cache_read AS cache,
  tokens.input + tokens.output + tokens.cache_creation + tokens.cache_read AS tokens,
  tokens.cache_read AS cache_read,
  tokens.cache_creation AS cache_write,
  tokens.input + tokens.cache_creation + tokens.cache_read AS prompt,
  model,
  cost_usd AS reported_cost_usd,
  nullif(context_tokens, 0) AS context_tokens
FROM events
WHERE type IN ('agent_turn', 'subagent_stopped', 'rate_limited', 'model_tokens')
