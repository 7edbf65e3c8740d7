-- pgsketch catalog, version 11: a rollup is never answered from rows its
-- source's definition, privileges or capture no longer match, and its
-- capture never makes a user's write fail. The objects live in
-- sql/trust_v1.sql, included below. Every rollup is answered exactly from
-- this version on until its next refresh, which rebuilds it whole and
-- records its source's definition.

\ir ../sql/trust_v1.sql
