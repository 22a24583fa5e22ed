"""The url_filter stage's parts: list files (`lists`), hosts through an offline public-suffix
list (`hosts`), FineWeb's word rules on the URL (`words`), and the index that matches a batch
of URLs against all of them (`matcher`)."""
