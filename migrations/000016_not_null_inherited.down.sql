-- Removes version 16: version 7's pgsketch.catalog() again.

DROP FUNCTION pgsketch.catalog();
ALTER FUNCTION pgsketch.catalog_v7() RENAME TO catalog;
