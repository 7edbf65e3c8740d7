-- Removes version 29: catalog goes back to version 23's, and the view
-- capture_in_place goes.
DROP FUNCTION pgsketch.catalog();
ALTER FUNCTION pgsketch.catalog_v23() RENAME TO catalog;
DROP VIEW pgsketch.capture_in_place;
